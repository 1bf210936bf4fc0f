"""The folder that a process's in-process environments keep their worlds in, and the sweep of
those that a killed process left behind.

The local executor's environments lay their worlds, and park replaced ones, in the scratch
folder (``ATOLL_ENVIRONMENTS_DIR``, else ``<output>/.cache/environments``): 8 MB to gigabytes
per world. A process that ends removes its own; one that is killed (SIGKILL, the machine's
out-of-memory killer, a lost machine) cannot. So each process's worlds live in one folder of
its own, ``atoll-pool-*``, which it holds an exclusive ``flock`` on for as long as it runs,
and a process that starts removes every such folder that nobody holds. The kernel drops a lock
when its holder dies, however it dies, so a folder is removed only once its owner is gone,
whichever process (on this machine) it was, and a pid reused since changes nothing.

A folder is locked and marked (a ``.atoll-pool`` file inside) before it gets its name (it is
made as ``.atoll-pool-*``, locked, marked, then renamed), so a sweep never sees a live
process's folder unlocked, and a folder without the mark is never removed: an operator who
points the scratch folder at a shared place (``/tmp``) loses nothing of anyone else's.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import stat
import tempfile
from pathlib import Path

logger = logging.getLogger("atoll.orchestrator")

PREFIX = "atoll-pool-"
MARK = ".atoll-pool"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class PoolFolder:
    """One process's folder in the scratch folder, locked until :meth:`remove`."""

    def __init__(self, scratch: Path) -> None:
        staging = Path(tempfile.mkdtemp(prefix="." + PREFIX, dir=scratch))
        self._lock = os.open(staging, _DIR_FLAGS)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # new: nobody else has it
            os.close(
                os.open(MARK, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=self._lock)
            )
            self.path = staging.with_name(staging.name.removeprefix("."))
            os.rename(staging, self.path)
        except BaseException:
            os.close(self._lock)
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def remove(self) -> None:
        """Remove the folder and everything in it, then let the lock go."""
        if self._lock < 0:
            return
        shutil.rmtree(self.path, ignore_errors=True)
        os.close(self._lock)
        self._lock = -1


def sweep_abandoned(scratch: Path) -> int:
    """Remove each ``atoll-pool-*`` folder in ``scratch`` that bears the mark and whose process
    is gone (nobody holds its lock); the number removed. Folders in use, and anything else, are
    left alone."""
    removed = 0
    try:
        names = [name for name in os.listdir(scratch) if name.startswith(PREFIX)]
    except FileNotFoundError:
        return 0
    for name in names:
        path = scratch / name
        try:
            descriptor = os.open(path, _DIR_FLAGS)
        except OSError:  # gone already, or not a folder of ours (a file, a symlink)
            continue
        try:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its process is running
            try:
                marked = stat.S_ISREG(os.stat(MARK, dir_fd=descriptor, follow_symlinks=False).st_mode)
            except FileNotFoundError:
                marked = False
            if not marked:
                continue  # not a folder atoll made
            # Ours now; removed under the lock so that a second sweep skips it meanwhile.
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(path)
            removed += 1
        except OSError as exc:
            logger.warning(
                "could not remove an abandoned world folder", extra={"path": str(path), "error": str(exc)}
            )
        finally:
            os.close(descriptor)
    if removed:
        logger.info("removed world folders left by processes that ended", extra={"folders": removed})
    return removed
