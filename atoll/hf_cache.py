"""Reading a benchmark out of the Hugging Face cache as it is: one look, then plain paths.

The cache (``hub/datasets--ORG--NAME/``) keeps each file once, under ``blobs/<hash>``; a
revision is a folder ``snapshots/<revision>/…`` whose files are relative symlinks into
``blobs/``. :func:`local_view` walks a benchmark folder once: inside the cache it follows
exactly those links — each hop read with ``readlink``, the last one a regular file directly
in the repository's ``blobs/`` folder — and refuses any other link (and any symlinked folder)
anywhere in the snapshot, so a crafted dataset cannot point the loader at ``/etc/passwd`` or
at another repository. What it returns, a :class:`LocalView`, maps every file to the plain
file to read; the loaders read those paths and never resolve a link themselves. Task overlays
are handed on as plain trees of hard links to the blobs (:meth:`LocalView.plain_tree`; a copy
where the file system cannot link), because the environment never follows symlinks.

:func:`download` fetches ``hf://`` datasets into the cache (huggingface_hub), with the hub's
own variables read once, here (:func:`hub_options`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from atoll.cache_paths import cache_path
from atoll.errors import AtollError, ErrorCode
from atoll.settings import variable

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
                ErrorCode.bad_benchmark, f"{link}: symlink leads nowhere ({current} is missing)"
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
        raise AtollError(ErrorCode.bad_benchmark, f"{link}: symlink chain longer than {_MAX_HOPS} links")
    raise AtollError(
        ErrorCode.bad_benchmark,
        f"{link}: symlink does not lead to a file of the Hugging Face cache's blobs/ folder",
    )


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def walk_files(root: Path) -> Iterator[Path]:
    """Every file (or link to one) below the benchmark folder ``root``, folders and files in
    name order, no link followed. Raises AtollError(bad_benchmark) naming a symlinked folder."""
    for directory, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(directory)
        dirnames.sort()
        for name in dirnames:
            if (base / name).is_symlink():
                raise AtollError(
                    ErrorCode.bad_benchmark, f"{base / name}: a symlinked folder is not followed"
                )
        for name in sorted(filenames):
            yield base / name


def _snapshot_files(root: Path, repo_root: Path) -> dict[str, Path]:
    """Every file under the snapshot ``root`` (relative POSIX path) mapped to its blob (or to
    itself, for a regular file); raises AtollError naming a link that is not the cache's own or
    a symlinked folder."""
    return {
        path.relative_to(root).as_posix(): resolve_blob(path, repo_root) if path.is_symlink() else path
        for path in walk_files(root)
    }


@dataclass(frozen=True)
class LocalView:
    """A benchmark folder as plain paths, computed once by :func:`local_view`.

    ``files`` is None for a plain folder (its paths are read as they are, and a symbolic link
    is refused where a file is read); for a Hugging Face cache snapshot it maps every file's
    path relative to ``root`` to the regular file to read (its blob).
    """

    root: Path
    files: Mapping[str, Path] | None = None

    @property
    def in_cache(self) -> bool:
        return self.files is not None

    def file(self, path: Path) -> Path:
        """The plain file to read for ``path`` (a path under ``root``): itself in a plain
        folder, its blob in the cache. Raises AtollError(bad_benchmark) for a symbolic link in
        a plain folder; a path the view does not hold comes back as it is (reading it fails
        with the reader's own message)."""
        if self.files is None:
            if path.is_symlink():
                raise AtollError(
                    ErrorCode.bad_benchmark,
                    f"{path}: is a symbolic link (only the Hugging Face cache's are followed)",
                )
            return path
        blob = self.files.get(self._relative(path))
        if blob is not None:
            return blob
        if path.is_symlink():  # outside the snapshot the view walked: no link is vetted there
            raise AtollError(
                ErrorCode.bad_benchmark, f"{path}: is a symbolic link outside the dataset's snapshot"
            )
        return path

    def exists(self, path: Path) -> bool:
        """Whether ``path`` (under ``root``) is a file or folder of the dataset."""
        if self.files is None:
            return path.exists() or path.is_symlink()
        return self._relative(path) in self.files or path.is_dir()

    def _relative(self, path: Path) -> str:
        return os.path.relpath(path, self.root).replace(os.sep, "/")

    def plain_tree(self, folder: Path) -> Path:
        """A folder of the cache snapshot as a plain tree (hard links to its blobs), built once
        per content and reused. Only for a view of the cache (``in_cache``)."""
        assert self.files is not None, "a plain folder is its own tree"
        prefix = folder.relative_to(self.root).as_posix() + "/"
        entries = sorted(
            (relative.removeprefix(prefix), blob)
            for relative, blob in self.files.items()
            if relative.startswith(prefix)
        )
        return _plain_tree(entries)


def local_view(root: Path) -> LocalView:
    """The benchmark folder ``root`` as plain paths (one walk when it is a cache snapshot, none
    otherwise). Raises AtollError(bad_benchmark) naming a cache link that leaves the cache's
    blobs, a chain too long, or a symlinked folder of the snapshot."""
    repo_root = cache_repo_root(root)
    if repo_root is None:
        return LocalView(root)
    return LocalView(root, _snapshot_files(root, repo_root))


def _plain_tree(entries: list[tuple[str, Path]]) -> Path:
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


# --- downloading ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HubOptions:
    """Where the hub cache is and whether to stay offline (``HF_HUB_OFFLINE``,
    ``HF_HUB_CACHE``, ``HF_HOME``)."""

    offline: bool = False
    cache_dir: str | None = None


def hub_options() -> HubOptions:
    """The hub's variables as they are set now (huggingface_hub reads them once, at import,
    so a process that sets them later would otherwise not be honoured)."""
    # Another tool's variables: read through the settings kit, the one reader of the environment.
    offline = (variable("HF_HUB_OFFLINE") or "").strip().lower() in ("1", "true", "yes", "on")
    home = variable("HF_HOME")
    cache_dir = variable("HF_HUB_CACHE") or (os.path.join(home, "hub") if home else None)
    return HubOptions(offline=offline, cache_dir=cache_dir)


def download(repo_id: str, revision: str | None, options: HubOptions | None = None) -> Path:
    """The snapshot folder of dataset ``repo_id`` at ``revision`` in the hub cache, downloaded
    first when online (``options`` default to :func:`hub_options`). Raises AtollError
    (bad_benchmark) naming the dataset when huggingface_hub is missing or the hub fails
    (offline without a cached copy, gated dataset, unknown id)."""
    text = f"hf://{repo_id}" + (f"@{revision}" if revision else "")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise AtollError(
            ErrorCode.bad_benchmark,
            f"{text}: downloading from Hugging Face needs huggingface_hub (pip install 'atoll[hf]')",
        ) from None
    options = options or hub_options()
    try:
        local = snapshot_download(
            repo_id=repo_id,
            repo_type="dataset",
            revision=revision or None,
            local_files_only=options.offline,
            cache_dir=options.cache_dir,
        )
    except Exception as exc:  # the hub raises many types: offline, gated, 404
        doing = "find the dataset in the cache" if options.offline else "download the dataset"
        raise AtollError(
            ErrorCode.bad_benchmark,
            f"{text}: could not {doing} ({type(exc).__name__}: {exc}); check the network, the "
            "dataset id and HF_TOKEN for gated datasets",
        ) from None
    return Path(local)
