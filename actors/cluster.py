"""Jobs on a Ray cluster: :func:`open_cluster_jobs` streams ``(index, result)``
as :func:`actors.open_jobs` does, with the jobs run by worker actors.

Each worker is a Ray actor running its jobs on an event loop of its own. It
builds its job once from a picklable ``make_job()`` (no live client crosses a
process), runs up to its share of the concurrency at once, and returns
results with the log lines its jobs wrote, each naming the worker. Work is
handed out as a worker has room, never split up front: a worker holds its
share of the concurrency and as many jobs again as it finished in its last
call, so a slow worker takes fewer. A call returns what finished about every
:data:`RETURN_S`: quick jobs do not pay a call's overhead each. A worker that
dies (its process killed, its node lost) has its unfinished jobs run again by
the others, and a new worker is started in its place where the cluster has
room; a job's result is delivered once.

Needs Ray (the ``ray`` extra). :func:`connect` joins a cluster, or starts one
on this machine on loopback only.
"""

from __future__ import annotations

from ._cluster_connect import ClusterError, ClusterOptions, RayMissing, connect, import_ray
from ._cluster_driver import REPLACE_S, open_cluster_jobs
from ._cluster_worker import RETURN_S

__all__ = [
    "REPLACE_S",
    "RETURN_S",
    "ClusterError",
    "ClusterOptions",
    "RayMissing",
    "connect",
    "import_ray",
    "open_cluster_jobs",
]
