"""Resolution beneath a directory descriptor: openat2, or the user-space walk."""

from __future__ import annotations

import ctypes
import errno
import os
import stat as stat_module
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from contextvars import ContextVar

PathLike = str | Sequence[str]

# openat2 has the same number on every Linux architecture (the unified syscall table).
_SYS_OPENAT2 = 437
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_MAX_LINKS = 40  # what the kernel allows (MAXSYMLINKS)
_EAGAIN_RETRIES = 16  # RESOLVE_BENEATH answers EAGAIN when a rename raced a ".." step
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_WALK_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class OutsideRoot(OSError):
    """The path resolves outside the directory it must stay beneath."""

    def __init__(self, path: str) -> None:
        super().__init__(errno.EXDEV, "resolves outside the root", path)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
# Our own handle on syscall(2) (``_libc["syscall"]`` is a new function object, not the
# shared attribute), typed once so that a call converts no argument objects.
_syscall = _libc["syscall"]
_syscall.restype = ctypes.c_long
_syscall.argtypes = (ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t)
_HOW_SIZE = ctypes.sizeof(_OpenHow)
# (flags, mode) -> (the open_how the kernel reads, its address); the kernel only reads it,
# so threads share one. A handful of flag sets are used; the bound is a safety net.
_hows: dict[tuple[int, int], tuple[_OpenHow, int]] = {}
_use_openat2: bool | None = None  # probed once; use_walk() forces the walk


def use_walk(walk: bool = True) -> None:
    """Force the user-space walk (``True``) or go back to probing for openat2 (``False``);
    for tests and for measuring the two."""
    global _use_openat2
    _use_openat2 = False if walk else None


def openat2_available() -> bool:
    """Whether this kernel (and any seccomp filter) lets us call openat2."""
    global _use_openat2
    if _use_openat2 is None:
        try:
            fd = _openat2(-100, ".", os.O_PATH | os.O_DIRECTORY, 0)  # -100: AT_FDCWD
        except OSError:
            _use_openat2 = False  # ENOSYS (old kernel) or EPERM (a seccomp filter)
        else:
            os.close(fd)
            _use_openat2 = True
    return _use_openat2


def _new_how(flags: int, mode: int) -> tuple[_OpenHow, int]:
    how = _OpenHow(flags | os.O_CLOEXEC, mode, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
    found = (how, ctypes.addressof(how))
    if len(_hows) < 256:
        _hows[(flags, mode)] = found
    return found


def _openat2(dir_fd: int, path: str, flags: int, mode: int) -> int:
    # openat2 refuses a mode unless the call may create (O_TMPFILE includes O_DIRECTORY's bit).
    if not (flags & os.O_CREAT or flags & os.O_TMPFILE == os.O_TMPFILE):
        mode = 0
    how = _hows.get((flags, mode)) or _new_how(flags, mode)  # held until the call returns
    encoded = os.fsencode(path)
    for _ in range(_EAGAIN_RETRIES):
        fd = _syscall(_SYS_OPENAT2, dir_fd, encoded, how[1], _HOW_SIZE)
        if fd >= 0:
            return fd
        code = ctypes.get_errno()
        if code == errno.EAGAIN:
            continue
        if code == errno.EXDEV:
            raise OutsideRoot(path)
        raise OSError(code, os.strerror(code), path)
    raise OSError(errno.EAGAIN, "the path kept changing while it was opened", path)


def _text(path: PathLike) -> str:
    text = path if isinstance(path, str) else "/".join(path)
    if text.startswith("/"):
        raise OutsideRoot(text)
    return text


def _walk(dir_fd: int, path: str, flags: int, mode: int) -> int:
    """openat2's job done in user space: follow links physically, never above ``dir_fd``."""
    pending = [part for part in reversed(path.split("/")) if part not in ("", ".")]
    stack = [os.open(".", _WALK_FLAGS, dir_fd=dir_fd)]  # our own path from the start down
    links = 0
    try:
        while pending:
            name = pending.pop()
            if name == "..":
                if len(stack) == 1:
                    raise OutsideRoot(path)
                os.close(stack.pop())
                continue
            last = not pending
            try:
                if last:
                    fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=stack[-1])
                    # O_PATH | O_NOFOLLOW opens a symlink itself instead of failing.
                    if not (
                        flags & os.O_PATH
                        and not flags & os.O_NOFOLLOW
                        and stat_module.S_ISLNK(os.fstat(fd).st_mode)
                    ):
                        return fd
                    os.close(fd)
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name)
                stack.append(os.open(name, _WALK_FLAGS, dir_fd=stack[-1]))
                continue
            except OSError as error:
                # A symlink where O_NOFOLLOW forbids one answers ELOOP, or ENOTDIR with
                # O_DIRECTORY (O_EXCL never follows; the caller's own O_NOFOLLOW wants the error).
                if error.errno not in (errno.ELOOP, errno.ENOTDIR) or (
                    last and flags & (os.O_NOFOLLOW | os.O_EXCL)
                ):
                    raise
                try:
                    target = os.readlink(name, dir_fd=stack[-1])
                except OSError:
                    raise error from None
            links += 1
            if links > _MAX_LINKS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
            if target.startswith("/"):
                rest = _anchored(target)
                if rest is None:
                    raise OutsideRoot(path)
                # An absolute link to the root's own path: go on from the root itself.
                for fd in stack:
                    os.close(fd)
                stack = [os.open(".", _WALK_FLAGS, dir_fd=_anchor.get()[0])]  # type: ignore[index]
                target = rest
            pending.extend(part for part in reversed(target.split("/")) if part not in ("", "."))
        # The path named a directory already on the stack ("", "a/..").
        return os.open(".", flags | os.O_CLOEXEC, mode, dir_fd=stack[-1])
    finally:
        for fd in stack:
            os.close(fd)


def open_beneath(dir_fd: int, path: PathLike, flags: int = os.O_RDONLY, mode: int = 0o666) -> int:
    """A new descriptor for ``path`` resolved beneath ``dir_fd`` (``os.open`` flags/mode).

    The final component is followed when it is a symlink, unless ``flags`` has
    ``O_NOFOLLOW`` or ``O_EXCL``. Raises OutsideRoot or the OSError of the open.
    """
    text = _text(path)
    if _use_openat2 or (_use_openat2 is None and openat2_available()):
        try:
            return _openat2(dir_fd, text or ".", flags, mode)
        except OutsideRoot:
            if _anchor.get() is None:
                raise
            # openat2 refuses every absolute link; the walk knows which ones name the root.
    return _walk(dir_fd, text, flags, mode)


_anchor: ContextVar[tuple[int, tuple[str, ...]] | None] = ContextVar("beneath_anchor", default=None)


@contextmanager
def anchored(root_fd: int, anchors: Sequence[str]) -> Iterator[None]:
    """Within the block, a symlink whose absolute target starts with one of ``anchors``
    (the root's own path, as the host or a sandbox spells it) continues from ``root_fd``
    instead of being refused: ``/srv/world/filesystem/a`` or ``/filesystem/a`` is the
    root's ``a``. Any other absolute target stays refused."""
    token = _anchor.set((root_fd, anchor_names(anchors)))
    try:
        yield
    finally:
        _anchor.reset(token)


def anchor_names(anchors: Sequence[str]) -> tuple[str, ...]:
    """``anchors`` as :func:`anchored` compares them (no trailing ``/``, no empty one)."""
    return tuple(anchor.rstrip("/") for anchor in anchors if anchor)


def _anchored(target: str) -> str | None:
    """The rest of an absolute link target below an anchor ("" for the root), or None."""
    current = _anchor.get()
    if current is None:
        return None
    for anchor in current[1]:
        if target == anchor or target.startswith(anchor + "/"):
            return target[len(anchor) :].lstrip("/")
    return None


def open_dir(dir_fd: int, path: PathLike = "", *, create: bool = False, mode: int = 0o777) -> int:
    """A descriptor (``O_RDONLY | O_DIRECTORY``) of the directory ``path``; ``create`` makes
    missing directories on the way, each one relative to the descriptor of its parent."""
    if not create:
        return open_beneath(dir_fd, path, _DIR_FLAGS)
    # Each prefix is resolved from the start again (so an inside link's ".." means its real
    # parent), and a missing folder is made in the descriptor of its resolved parent.
    with suppress(FileNotFoundError):
        return open_beneath(dir_fd, path, _DIR_FLAGS)
    parts = _parts(path)
    current = os.dup(dir_fd)
    try:
        for index in range(len(parts)):
            try:
                nxt = open_beneath(dir_fd, parts[: index + 1], _DIR_FLAGS)
            except FileNotFoundError:
                with suppress(FileExistsError):  # made meanwhile by someone else: fine
                    os.mkdir(parts[index], mode, dir_fd=current)
                nxt = open_beneath(current, parts[index], _DIR_FLAGS)
            os.close(current)
            current = nxt
        return current
    except BaseException:
        os.close(current)
        raise


def _parts(path: PathLike) -> list[str]:
    return [part for part in _text(path).split("/") if part not in ("", ".")]


def parent_of(dir_fd: int, path: PathLike, *, create: bool = False) -> tuple[int, str]:
    """(descriptor of the parent folder, final name) of ``path``; the caller closes the fd.

    The final component is not followed. Raises ValueError when ``path`` has no final
    name (the start itself, or one ending in ``..``).
    """
    parts = _parts(path)
    if not parts or parts[-1] == "..":
        raise ValueError(f"{_text(path)!r} does not name an entry inside a folder")
    return open_dir(dir_fd, parts[:-1], create=create), parts[-1]


def locate(dir_fd: int, path: PathLike, *, create: bool = False) -> tuple[int, str]:
    """Like :func:`parent_of`, but a final symlink is followed (beneath ``dir_fd``) to the
    entry it names, so writing through an inside link writes its target."""
    parts = _parts(path)
    for _ in range(_MAX_LINKS):
        parent, name = parent_of(dir_fd, parts, create=create)
        try:
            target = os.readlink(name, dir_fd=parent)
        except OSError:  # not a link, or absent: this is the entry
            return parent, name
        os.close(parent)
        if target.startswith("/"):
            rest = _anchored(target)
            if rest is None or _anchor.get()[0] != dir_fd:  # type: ignore[index]
                raise OutsideRoot(_text(path))
            parts = [part for part in rest.split("/") if part not in ("", ".")]
        else:
            # Relative to the link's folder; the kernel (or the walk) resolves it.
            parts = parts[:-1] + [part for part in target.split("/") if part not in ("", ".")]
        if not parts or parts[-1] == "..":
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), _text(path))
    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), _text(path))


@contextmanager
def _closing(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)
