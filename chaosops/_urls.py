"""URLs as messages and logs show them: never with a secret in them."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def shown_url(url: str) -> str:
    """``url`` with its user info masked: ``http://user:***@host`` for a user
    and password, ``http://***@host`` for a user alone (often a token), the
    URL itself when it has none; ``<invalid URL>`` when it cannot be read."""
    try:
        parts = urlsplit(url)
        if parts.username is None and parts.password is None:
            return url
        host = parts.netloc.rpartition("@")[2]
    except ValueError:
        return "<invalid URL>"
    user = "***" if parts.password is None else f"{parts.username}:***"
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))


def http_url_with_host(url: str) -> bool:
    """Whether ``url`` has an http(s) scheme and a host (what any base URL needs)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)
