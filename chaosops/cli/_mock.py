"""``chaosops mock-llm``: the local OpenAI-compatible server of :mod:`chaosops.mock_llm`."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from ._args import Parser
from ._errors import PROG, CLIError, one_line


def cmd_mock_llm(argv: Sequence[str]) -> int:
    """``chaosops mock-llm``: its options come from :func:`chaosops.mock_llm.build_parser`
    (parsed here, so other commands do not pay for importing the server)."""
    import anyio

    from chaosops import mock_llm

    parser = Parser(
        prog=f"{PROG} mock-llm",
        description="Serve POST /v1/chat/completions and GET /v1/models on loopback, "
        "answering with sensible ChaosOps actions.",
    )
    args = mock_llm.build_parser(parser).parse_args(argv)
    try:
        config = mock_llm.config_from_args(args)
    except ValueError as exc:
        errors = getattr(exc, "errors", None)
        if callable(errors):  # pydantic: name the option
            err = errors()[0]
            option = "--" + "-".join(str(part) for part in err["loc"]).replace("_", "-")
            raise CLIError(f"mock-llm {option}: {err['msg']} (got {err.get('input')!r})") from None
        raise CLIError(f"mock-llm: {one_line(exc)}") from None

    async def serve() -> None:
        async with anyio.create_task_group() as tg:
            port = await tg.start(partial(mock_llm.serve, config, install_signal_handlers=True))
            host = f"[{config.host}]" if ":" in config.host else config.host
            print(
                f"mock LLM serving model {config.model!r} at http://{host}:{port}/v1 "
                f"(latency {config.latency}); Ctrl-C to stop",
                flush=True,
            )

    try:
        anyio.run(serve, backend="asyncio")
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        raise CLIError(
            f"mock-llm cannot bind {config.host}:{config.port}: {exc.strerror or exc}", code=1
        ) from None
    return 0
