"""Reading a benchmark out of the Hugging Face cache as it is.

The cache (``hub/datasets--ORG--NAME/``) keeps each file once, under ``blobs/<hash>``; a
revision is a folder ``snapshots/<revision>/…`` whose files are relative symlinks into
``blobs/``.  The loader follows exactly those links — each hop read with ``readlink``, the
last one a regular file directly in the repository's ``blobs/`` folder — and refuses any
other link, so a crafted dataset cannot point the loader at ``/etc/passwd`` or at another
repository.  Task overlays are handed on as plain trees of hard links to the blobs (a copy
where the file system cannot link), because the environment never follows symlinks.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from atoll.cache_paths import cache_path
from atoll.errors import AtollError

_MAX_HOPS = 8


def cache_repo_root(snapshot: Path) -> Path | None:
    """The repository folder of the cache when ``snapshot`` is ``…/snapshots/<revision>``
    next to a ``blobs/`` folder, else None."""
    parent = snapshot.parent
    if parent.name == "snapshots" and (parent.parent / "blobs").is_dir():
        return parent.parent
    return None


def resolve_blob(link: Path, repo_root: Path) -> Path:
    """The blob ``link`` leads to, following the cache's own links only.

    Raises AtollError(bad_benchmark) naming the link when a hop is absolute, leaves the
    repository, ends anywhere but a regular file in ``blobs/``, or the chain is too long.
    """
    blobs = repo_root / "blobs"
    current = link
    for _ in range(_MAX_HOPS):
        try:
            info = current.lstat()
        except OSError:
            raise AtollError(
                "bad_benchmark", f"{link}: symlink leads nowhere ({current} is missing)"
            ) from None
        if not stat.S_ISLNK(info.st_mode):
            if current.parent == blobs and stat.S_ISREG(info.st_mode):
                return current
            break
        target = os.readlink(current)
        if os.path.isabs(target):
            break
        # Lexical join: a hop is judged by where it points, never by resolving the string.
        current = Path(os.path.normpath(current.parent / target))
        if not current.is_relative_to(repo_root):
            break
    else:
        raise AtollError("bad_benchmark", f"{link}: symlink chain longer than {_MAX_HOPS} links")
    raise AtollError(
        "bad_benchmark",
        f"{link}: symlink does not lead to a file of the Hugging Face cache's blobs/ folder",
    )


def readable_path(path: Path, repo_root: Path | None) -> Path:
    """``path`` itself when it is a regular file, its blob when it is a cache link; raises
    AtollError for any other link."""
    if not path.is_symlink():
        return path
    if repo_root is None:
        raise AtollError(
            "bad_benchmark", f"{path}: is a symbolic link (only the Hugging Face cache's are followed)"
        )
    return resolve_blob(path, repo_root)


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def materialize_tree(folder: Path, repo_root: Path) -> Path:
    """A plain copy of the cache folder ``folder`` (hard links to its blobs), built once per
    content and reused; raises AtollError naming any link that is not the cache's own."""
    entries: list[tuple[str, Path]] = []
    for directory, dirnames, filenames in os.walk(folder, followlinks=False):
        base = Path(directory)
        for name in sorted(dirnames):
            if (base / name).is_symlink():
                raise AtollError("bad_benchmark", f"{base / name}: a symlinked folder is not followed")
        for name in sorted(filenames):
            path = base / name
            entries.append((path.relative_to(folder).as_posix(), readable_path(path, repo_root)))
    entries.sort()
    digest = hashlib.sha256()
    for relative, blob in entries:
        digest.update(f"{relative}\0{blob.name}\n".encode())
    target = cache_path("hf-overlays") / digest.hexdigest()[:32]
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    try:
        for relative, blob in entries:
            destination = staging / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            _link_or_copy(blob, destination)
        try:
            staging.rename(target)
        except OSError:  # another loader built the same tree meanwhile
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
