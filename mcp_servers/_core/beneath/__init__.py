"""Paths beneath a root, opened by directory file descriptors (DESIGN §8).

Checking a path string and then opening it again loses a race: between the two, the
world's owner (``code_exec``) can swap a directory for a symlink to the host. So nothing
here re-opens a checked string. Every operation takes a directory descriptor (usually the
root's) and a relative path, and the kernel resolves the path *beneath* that descriptor:

- ``openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`` where the kernel has it (Linux
  5.6+); the kernel refuses any step (``..``, an absolute or relative symlink, a
  ``/proc`` magic link) that would leave the directory, at the moment of the lookup;
- otherwise a component-by-component walk: each directory opened with
  ``O_NOFOLLOW | O_DIRECTORY`` relative to the previous one, a symlink met on the way
  read with ``readlinkat`` and expanded in place, ``..`` popping our own stack of
  descriptors, so resolution is physical and can never climb above the start.

Symlinks inside the tree that point inside it are followed, resolved physically (never
lexically: ``a/up -> ..`` then ``a/up/..`` is the root's parent, refused). A symlink with an
absolute target is refused, as ``RESOLVE_BENEATH`` does, unless the target spells the
root's own path (:func:`anchored`, which :class:`Root` sets up): then it continues from
the root. Anything resolving outside raises :class:`OutsideRoot` (an ``OSError`` with
``errno.EXDEV``); the usual ``OSError`` subclasses (``FileNotFoundError``,
``NotADirectoryError``, ``FileExistsError``, …) keep their meaning.

Paths are ``str`` (``"a/b.txt"``) or sequences of components (``["a", "b.txt"]``); ``""``
and ``[]`` mean the start directory itself. Operations that act on a name inside a folder
(create, unlink, rename, stat without following) resolve the *parent* beneath the root and
then use the final name with ``dir_fd=``, so the final component is never followed unless
the operation says so.

:func:`walk` lists a tree top-down by descriptors, never following a link (for populate,
snapshot and search walks). :class:`Root` bundles a root path: each call opens the root once (so a root replaced by a
populate is seen at the next call) and runs the function on its descriptor.
"""

from mcp_servers._core.beneath._ops import (
    Entry,
    copy_file,
    create_exclusive,
    entries,
    make_dirs,
    open_file,
    read_bytes,
    remove_tree,
    rename,
    rmdir,
    stat,
    unlink,
    walk,
    write_atomic,
)
from mcp_servers._core.beneath._resolve import (
    OutsideRoot,
    PathLike,
    anchored,
    locate,
    open_beneath,
    open_dir,
    openat2_available,
    parent_of,
    use_walk,
)
from mcp_servers._core.beneath._root import Root

__all__ = [
    "Entry",
    "OutsideRoot",
    "PathLike",
    "Root",
    "anchored",
    "copy_file",
    "create_exclusive",
    "entries",
    "locate",
    "make_dirs",
    "open_beneath",
    "open_dir",
    "open_file",
    "openat2_available",
    "parent_of",
    "read_bytes",
    "remove_tree",
    "rename",
    "rmdir",
    "stat",
    "unlink",
    "use_walk",
    "walk",
    "write_atomic",
]
