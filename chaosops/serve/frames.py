"""What reaches OpenEnv's WebSocket handler: JSON objects only. A message that
is JSON but no object (``[]``, ``5``) gets OpenEnv's ``VALIDATION_ERROR``
answer, and the session goes on; OpenEnv's own handler would answer a Python
error or drop the connection."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_NOT_AN_OBJECT = json.dumps(
    {
        "type": "error",
        "data": {
            "message": 'a message is a JSON object, {"type": "reset" | "step" | "state" | '
            '"close" | "mcp", "data": {...}}',
            "code": "VALIDATION_ERROR",
        },
    }
)


class ObjectsOnly:
    """ASGI middleware: on the ``/ws`` WebSocket, answers a message that is no
    JSON object itself, and passes the others (invalid JSON included, which
    OpenEnv answers) on."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket" or scope.get("path") != "/ws":
            await self.app(scope, receive, send)
            return

        async def objects_only() -> Message:
            while True:
                message = await receive()
                if message["type"] != "websocket.receive" or _is_object_or_not_json(message):
                    return message
                await send({"type": "websocket.send", "text": _NOT_AN_OBJECT})

        await self.app(scope, objects_only, send)


def _is_object_or_not_json(message: Message) -> bool:
    text = message.get("text")
    if text is None:
        text = message.get("bytes") or b""
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, UnicodeDecodeError):
        return True  # not JSON at all: OpenEnv's INVALID_JSON answers it
