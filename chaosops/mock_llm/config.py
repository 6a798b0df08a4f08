"""The mock server's settings and its counters."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from .latency import parse_latency


class MockLLMConfig(BaseModel):
    """Settings of the mock server (all optional)."""

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    model: str = "chaosops-mock"
    latency: str = "0ms"
    rate_429: float = Field(default=0.0, ge=0.0, le=1.0)
    retry_after_s: float = Field(default=0.05, ge=0.0)
    rate_500: float = Field(default=0.0, ge=0.0, le=1.0)
    rate_garbage: float = Field(default=0.0, ge=0.0, le=1.0)
    answer_style: Literal[
        "json", "fenced", "chatter", "mixed", "placeholder", "junk-args", "cut"
    ] = "json"
    """How answers are written: json, fenced or chatter text (mixed: any of the
    three); or faulty: the format's placeholder as target, junk args, or cut
    at the token limit (finish_reason length; a tool call's arguments halved)."""
    null_logprobs: bool = False
    """Answer ``logprobs: null`` even when asked for them (as some servers do)."""
    seed: int = 0
    first_statuses: list[Literal[200, 400, 429, 500]] = Field(default_factory=list)
    """Scripted faults: the first requests answer these statuses, in order, before
    the random rates apply (200 = a normal answer; 400 names a request field in
    its body); for tests and demos."""
    refuse: list[Literal["json_schema", "tools"]] = Field(default_factory=list)
    """Request forms refused, as some servers do: ``json_schema`` as
    llama-cpp-python's server refuses it (HTTP 500, its validation message),
    ``tools`` with an HTTP 400."""
    record: str | None = None
    """A file each chat request's JSON body is appended to, one line each, as received."""
    api_key: str | None = Field(default=None, repr=False)
    """When set, requests must carry ``Authorization: Bearer <api_key>`` (else 401)."""

    @field_validator("latency")
    @classmethod
    def _check_latency(cls, value: str) -> str:
        parse_latency(value)
        return value


@dataclass
class MockStats:
    """Counters of a running mock server (``GET /stats``)."""

    requests: int = 0
    completed: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0
    disconnected: int = 0
    rate_limited: int = 0
    server_errors: int = 0
    garbage: int = 0
    tool_calls: int = 0
    refused: int = 0
    off_schema: int = 0
    """Answers the request's schema did not admit, replaced by one it does."""
    by_status: dict[str, int] = field(default_factory=dict)

    def snapshot(self) -> dict[str, Any]:
        """A plain-dict copy."""
        return asdict(self)
