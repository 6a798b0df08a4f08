"""What an LLM policy's endpoint can do wrong, as exception types: light to
import, so that code catching them does not load the HTTP client."""

from __future__ import annotations


class LLMEndpointError(RuntimeError):
    """The endpoint cannot serve the run (unreachable, wrong model, bad key): one line."""


class LLMRequestError(RuntimeError):
    """A chat-completions call failed for good (after its retries, or a non-retryable error)."""


class LLMRejectedError(LLMRequestError):
    """The server refused the request as malformed (400, 422, or a 500 whose body
    names a field of the request): sending it again cannot help. ``reason`` is
    the start of the server's body."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class LLMDeadlineError(LLMRequestError):
    """The turn's deadline leaves no time for (another) request."""


class AnswerRefused(LLMEndpointError):
    """The endpoint refuses the answer format asked for; ``reason`` is the
    start of the server's body."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason
