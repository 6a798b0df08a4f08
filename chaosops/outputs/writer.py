"""The writer of a run folder: files opened for appending under an exclusive
lock, each episode's lines written whole, the summary moved into place."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from chaosops.env.results import EpisodeResult

from .files import OutputError, atomic_write_bytes
from .records import (
    RESULTS_FILE,
    SUMMARY_FILE,
    TRAJECTORIES_FILE,
    ListedKeys,
    Renderer,
    ResultLine,
    episode_lines,
    json_default,
)
from .recovery import ResumeState, recover


class RunOutputs:
    """The writers of one output folder (see the module docstring).

    Use as a context manager, or call :meth:`open` and :meth:`close`.
    """

    def __init__(
        self,
        out_dir: str | Path,
        *,
        keys: Sequence[str] = (),
        resume: bool = False,
        fsync: bool = False,
    ) -> None:
        # the plan's run keys (with ``position(key)``, as ListedKeys); a plain
        # sequence is listed
        self.keys: Any = keys if hasattr(keys, "position") else ListedKeys(keys)
        self.out_dir = Path(out_dir)
        self.resume = resume
        self.fsync = fsync
        self.results_path = self.out_dir / RESULTS_FILE
        self.trajectories_path = self.out_dir / TRAJECTORIES_FILE
        self.summary_path = self.out_dir / SUMMARY_FILE
        self.state = ResumeState()
        self._results: Any = None
        self._trajectories: Any = None

    # -- setup

    def _prepare_folder(self) -> None:
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise OutputError(
                f"output folder {self.out_dir} exists and is not a folder", reason="not-a-folder"
            ) from None
        except OSError as exc:
            raise OutputError(
                f"cannot create output folder {self.out_dir}: {exc.strerror or exc}",
                reason="not-writable",
            ) from None
        try:
            with tempfile.TemporaryFile(dir=self.out_dir):
                pass
        except OSError as exc:
            raise OutputError(
                f"output folder {self.out_dir} is not writable: {exc.strerror or exc}",
                reason="not-writable",
            ) from None

    def _has_content(self, path: Path) -> bool:
        try:
            return path.stat().st_size > 0
        except FileNotFoundError:
            return False

    def open(self) -> ResumeState:
        """Prepare the folder and open the files for appending.

        Raises :class:`OutputError` when the folder cannot be created or written,
        or, without ``resume``, when it already holds a run.
        """
        self._prepare_folder()
        self._results = self._open_append(self.results_path)
        try:
            self._lock()
            if not self.resume:
                for path in (self.results_path, self.trajectories_path):
                    if self._has_content(path):
                        raise OutputError(
                            f"output folder {self.out_dir} already holds {path.name}",
                            usage=True,
                            reason="holds-a-run",
                        )
            else:
                try:
                    self.state, rewritten = recover(
                        self.results_path, self.trajectories_path, self.keys
                    )
                    if rewritten:
                        self._reopen_results()
                except OSError as exc:
                    raise OutputError(
                        f"cannot resume from {self.out_dir}: {exc.strerror or exc}"
                    ) from None
            self._trajectories = self._open_append(self.trajectories_path)
        except BaseException:
            self.close()  # and the lock with it
            raise
        return self.state

    def _open_append(self, path: Path) -> Any:
        # Unbuffered, for appending: each write() is one system call.
        try:
            return open(path, "ab", buffering=0)
        except OSError as exc:
            raise OutputError(
                f"cannot open output files in {self.out_dir}: {exc.strerror or exc}"
            ) from None

    def _reopen_results(self) -> None:
        """Append to (and lock) the results file that replaced the one opened:
        the old handle writes to a file no longer in the folder."""
        old = self._results
        self._results = self._open_append(self.results_path)
        self._lock()
        old.close()

    def _lock(self) -> None:
        # An advisory lock on the open results file: released by close() and
        # by the system when the process ends, however it ends.
        try:
            import fcntl  # POSIX only
        except ImportError:  # pragma: no cover - elsewhere: no lock
            return
        try:
            fcntl.flock(self._results.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputError(
                f"output folder {self.out_dir} is in use by another chaosops run (it holds "
                f"{RESULTS_FILE} locked)",
                usage=True,
                reason="in-use",
            ) from None
        except OSError:  # a file system without locks (some network mounts): go on
            return

    def close(self) -> None:
        """Close the files (idempotent); the folder's lock goes with them."""
        for handle in (self._trajectories, self._results):
            if handle is not None:
                handle.close()
        self._trajectories = self._results = None

    def __enter__(self) -> RunOutputs:
        self.open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- writing

    def _write(self, handle: Any, data: bytes) -> None:
        try:
            view = memoryview(data)
            while view:
                written = handle.write(view)
                view = view[written:]
            if self.fsync:
                os.fsync(handle.fileno())
        except OSError as exc:  # a full disk, say: the error names the file
            if exc.filename is not None or exc.errno is None:
                raise
            raise OSError(exc.errno, exc.strerror, str(handle.name)) from exc

    def write_episode(
        self,
        result: EpisodeResult,
        *,
        policy: str,
        key: str,
        render: Renderer | None = None,
        turn_timeout: Any = None,
        roles: Mapping[str, Any] | None = None,
    ) -> ResultLine:
        """Append one finished episode: trajectory lines first, then its results
        line (see :func:`episode_lines`). Returns the results record."""
        if self._results is None or self._trajectories is None:
            raise RuntimeError("RunOutputs.write_episode() before open()")
        trajectory, results_line, record = episode_lines(
            result, policy=policy, key=key, render=render, turn_timeout=turn_timeout, roles=roles
        )
        self.write_lines(trajectory, results_line)
        return record

    def write_lines(self, trajectory: bytes, results_line: bytes) -> None:
        """Append an episode's lines made by :func:`episode_lines` (here, or in a
        Ray worker): trajectory lines first, then the results line."""
        if self._results is None or self._trajectories is None:
            raise RuntimeError("RunOutputs.write_lines() before open()")
        if trajectory:
            self._write(self._trajectories, trajectory)
        self._write(self._results, results_line)

    def write_summary(self, summary: Mapping[str, Any]) -> Path:
        """Write ``summary.json`` atomically; returns its path."""
        data = orjson.dumps(summary, default=json_default, option=orjson.OPT_INDENT_2) + b"\n"
        atomic_write_bytes(self.summary_path, data)
        return self.summary_path
