"""Joining a Ray cluster, or starting one on this machine on loopback only;
the errors of a cluster that cannot be used."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

RAY_MISSING = "Ray is not installed: install the 'ray' extra (pip install -e '.[ray]')"


class RayMissing(ImportError):
    """Ray cannot be imported."""


class ClusterError(RuntimeError):
    """The cluster cannot be reached or used; the message is one line."""


@dataclass(frozen=True)
class ClusterOptions:
    """Where to run: ``address`` ``local`` (a Ray instance for this run, on
    loopback), ``auto`` or ``HOST:PORT`` (a running cluster); ``workers`` (None:
    one per CPU of the cluster)."""

    address: str = "local"
    workers: int | None = None


def import_ray() -> Any:
    try:
        # the ray extra
        import ray
    except ImportError:
        raise RayMissing(RAY_MISSING) from None
    return ray


@contextmanager
def connect(address: str) -> Iterator[Any]:
    """This process connected to Ray for the block (the ``ray`` module).

    ``local`` starts an instance on 127.0.0.1 only and stops it after; ``auto``
    or ``HOST:PORT`` joins a running cluster (``ray start --head``), checked
    to answer first: Ray itself retries an unreachable address for minutes.
    """
    ray = import_ray()
    if address == "local":
        # every node on 127.0.0.1: by default Ray binds to the machine's address
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        _init(ray, address, include_dashboard=False)
    else:
        if address != "auto":
            _check_reachable(address)
        _init(ray, address, address=address)
    try:
        yield ray
    finally:
        ray.shutdown()


def _init(ray: Any, where: str, **options: Any) -> None:
    try:
        ray.init(log_to_driver=False, logging_level=logging.ERROR, **options)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        text = " ".join(str(exc).split())
        raise ClusterError(f"cannot use the Ray cluster at {where}: {text[:300]}") from None


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(
            f"Ray address {address!r}: expected local, auto or HOST:PORT (the head's GCS port)"
        )
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ClusterError(
            f"cannot reach the Ray cluster at {address}: {reason} (a head is started "
            "with `ray start --head`)"
        ) from None
