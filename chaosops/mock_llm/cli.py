"""``chaosops mock-llm``: its options and its main."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import anyio

from .config import MockLLMConfig
from .server import listen_error, serve_until_stopped


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Add the mock's options to ``parser`` (or a new one); used by ``chaosops mock-llm``."""
    p = parser or argparse.ArgumentParser(
        prog="chaosops mock-llm",
        description="Local OpenAI-compatible chat-completions server playing ChaosOps.",
    )
    d = MockLLMConfig()
    p.add_argument("--host", default=d.host, help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=d.port, help="port (0 picks a free one)")
    p.add_argument("--model", default=d.model, help="served model name")
    p.add_argument(
        "--latency",
        default=d.latency,
        help="per-request latency: 50ms, 0.05s, uniform:20-80ms, normal:50,10ms, exp:50ms",
    )
    p.add_argument("--rate-429", type=float, default=0.0, help="share of 429 answers")
    p.add_argument("--retry-after", type=float, default=d.retry_after_s, help="429 Retry-After, s")
    p.add_argument("--rate-500", type=float, default=0.0, help="share of 500 answers")
    p.add_argument("--rate-garbage", type=float, default=0.0, help="share of unparseable answers")
    p.add_argument(
        "--answer-style",
        default=d.answer_style,
        choices=["json", "fenced", "chatter", "mixed", "placeholder", "junk-args", "cut"],
        help="json, fenced or chatter text (mixed: any); faulty: placeholder targets, "
        "junk args, answers cut at the token limit",
    )
    p.add_argument(
        "--null-logprobs", action="store_true", help="answer logprobs: null even when asked"
    )
    p.add_argument(
        "--refuse",
        action="append",
        default=[],
        choices=["json_schema", "tools"],
        help="refuse a request form, as some servers do: json_schema as llama-cpp-python's "
        "server (HTTP 500 and its validation message), tools (HTTP 400); repeatable",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--record",
        metavar="PATH",
        default=None,
        help="append each chat request's JSON body to PATH, one line each (what a policy sent)",
    )
    p.add_argument(
        "--require-api-key",
        metavar="ENV_VAR",
        default=None,
        help="require the key held in this environment variable (never printed)",
    )
    return p


def config_from_args(args: argparse.Namespace) -> MockLLMConfig:
    """Build a :class:`MockLLMConfig` from parsed :func:`build_parser` options."""
    key = None
    if args.require_api_key:
        key = os.environ.get(args.require_api_key)
        if not key:
            raise ValueError(
                f"--require-api-key: environment variable {args.require_api_key} is empty"
            )
    return MockLLMConfig(
        host=args.host,
        port=args.port,
        model=args.model,
        latency=args.latency,
        rate_429=args.rate_429,
        retry_after_s=args.retry_after,
        rate_500=args.rate_500,
        rate_garbage=args.rate_garbage,
        answer_style=args.answer_style,
        seed=args.seed,
        record=args.record,
        null_logprobs=args.null_logprobs,
        refuse=args.refuse,
        api_key=key,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``chaosops mock-llm``; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = config_from_args(args)
    except ValueError as exc:
        message = str(exc).splitlines()[0]
        if hasattr(exc, "errors"):  # pydantic: name the field
            err = exc.errors()[0]
            message = f"{'.'.join(map(str, err['loc']))}: {err['msg']}"
        print(f"chaosops mock-llm: {message}", file=sys.stderr)
        return 2
    try:
        anyio.run(serve_until_stopped, config, backend="asyncio")
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        print(f"chaosops mock-llm: {listen_error(exc, config.host, config.port)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
