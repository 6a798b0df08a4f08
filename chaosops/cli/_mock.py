"""``chaosops mock-llm``: the local OpenAI-compatible server of :mod:`chaosops.mock_llm`."""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from ._args import Parser
from ._errors import PROG, CLIError, one_line


def cmd_mock_llm(argv: Sequence[str]) -> int:
    """``chaosops mock-llm``: its options come from :func:`chaosops.mock_llm.build_parser`
    (parsed here, so other commands do not pay for importing the server)."""
    # uvicorn, starlette and jsonschema: this command's own
    from chaosops.mock_llm import build_parser, config_from_args, listen_error, serve_until_stopped

    parser = Parser(
        prog=f"{PROG} mock-llm",
        description="Serve POST /v1/chat/completions and GET /v1/models on loopback, "
        "answering with sensible ChaosOps actions.",
    )
    args = build_parser(parser).parse_args(argv)
    try:
        config = config_from_args(args)
    except ValueError as exc:
        errors = getattr(exc, "errors", None)
        if callable(errors):  # pydantic: name the option
            err = errors()[0]
            option = "--" + "-".join(str(part) for part in err["loc"]).replace("_", "-")
            message = str(err["msg"]).removeprefix("Value error, ")
            raise CLIError(f"mock-llm {option}: {message} (got {err.get('input')!r})") from None
        raise CLIError(f"mock-llm: {one_line(exc)}") from None

    try:
        anyio.run(serve_until_stopped, config, backend="asyncio")
    except KeyboardInterrupt:
        pass
    except OSError as exc:  # --host or --port: exit 2, as chaosops view
        raise CLIError(f"mock-llm: {listen_error(exc, config.host, config.port)}") from None
    return 0
