"""mcp_servers._core.beneath: every operation stays beneath its root, by descriptor.

Each test runs twice: with openat2 (the kernel resolves beneath) and with the
component-by-component walk used where openat2 is missing.
"""

from __future__ import annotations

import ctypes
import os
import stat
import threading
from pathlib import Path

import pytest

from mcp_servers._core import beneath
from mcp_servers._core.beneath import OutsideRoot, Root


@pytest.fixture(params=["openat2", "walk"])
def backend(request):
    if request.param == "openat2" and not beneath.openat2_available():
        pytest.fail("this kernel has no openat2; the openat2 backend cannot be tested here")
    beneath.use_walk(request.param == "walk")
    yield request.param
    beneath.use_walk(False)


@pytest.fixture
def world(tmp_path: Path, backend) -> tuple[Root, Path, Path]:
    """(Root of the world, world path, a host folder beside it holding a secret)."""
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.txt").write_text("HOST SECRET")
    root = tmp_path / "world"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "note.txt").write_text("inside")
    return Root(root), root, host


def test_reads_a_file_and_follows_an_inside_link(world):
    tree, root, _ = world
    (root / "link.txt").symlink_to("a/b/note.txt")
    (root / "a" / "sideways").symlink_to("../a/b")
    assert tree.read_bytes("a/b/note.txt") == b"inside"
    assert tree.read_bytes("link.txt") == b"inside"
    assert tree.read_bytes(["a", "sideways", "note.txt"]) == b"inside"


def test_dotdot_above_the_root_is_refused(world):
    tree, _, _ = world
    with pytest.raises(OutsideRoot):
        tree.read_bytes("../host/secret.txt")
    with pytest.raises(OutsideRoot):
        tree.read_bytes("a/../../host/secret.txt")


def test_a_chain_of_links_is_resolved_physically_not_lexically(world):
    tree, root, host = world
    # On paper each link stays inside; followed for real, e1 is the world's parent.
    (root / "a" / "up").symlink_to("..")
    (root / "e1").symlink_to("a/up/..")
    (root / "e2").symlink_to("e1/host")
    for path in ("e1/host/secret.txt", "e2/secret.txt", "a/up/../host/secret.txt"):
        with pytest.raises(OutsideRoot):
            tree.read_bytes(path)
    with pytest.raises(OutsideRoot):
        tree.write_atomic("e2/planted.txt", b"x")
    with pytest.raises(OutsideRoot):
        tree.make_dirs("e2/newdir")
    assert sorted(os.listdir(host)) == ["secret.txt"]
    # The inside half of the chain still works.
    assert tree.read_bytes("a/up/a/b/note.txt") == b"inside"


def test_absolute_and_outward_links_are_refused(world):
    tree, root, host = world
    (root / "abs").symlink_to(host / "secret.txt")
    (root / "rel").symlink_to("../host/secret.txt")
    (root / "dir_out").symlink_to("../host")
    for path in ("abs", "rel", "dir_out/secret.txt"):
        with pytest.raises(OutsideRoot):
            tree.read_bytes(path)
        with pytest.raises(OutsideRoot):
            tree.stat(path)
    with pytest.raises(OutsideRoot):
        tree.entries("dir_out")
    with pytest.raises(OutsideRoot):
        tree.create_exclusive("dir_out/new.txt", b"x")
    with pytest.raises(OutsideRoot):
        tree.write_atomic("rel", b"overwrite")
    assert (host / "secret.txt").read_text() == "HOST SECRET"
    assert sorted(os.listdir(host)) == ["secret.txt"]
    with pytest.raises(OutsideRoot):
        tree.read_bytes("/etc/passwd")


def test_stat_without_following_sees_the_link_itself(world):
    tree, root, _ = world
    (root / "rel").symlink_to("../host/secret.txt")
    assert stat.S_ISLNK(tree.stat("rel", follow_symlinks=False).st_mode)


def test_write_atomic_replaces_keeps_the_mode_and_writes_through_inside_links(world):
    tree, root, _ = world
    note = root / "a" / "b" / "note.txt"
    note.chmod(0o640)
    (root / "alias").symlink_to("a/b/note.txt")
    tree.write_atomic("alias", b"new")
    assert note.read_bytes() == b"new" and (root / "alias").is_symlink()
    assert note.stat().st_mode & 0o777 == 0o640
    tree.write_atomic("fresh/deep/file.bin", lambda handle: handle.write(b"abc"), make_parents=True)
    assert (root / "fresh" / "deep" / "file.bin").read_bytes() == b"abc"
    assert (root / "fresh" / "deep" / "file.bin").stat().st_mode & 0o777 == 0o644


def test_a_failed_atomic_write_leaves_no_temp_file(world):
    tree, root, _ = world

    def explode(handle):
        handle.write(b"half")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        tree.write_atomic("a/b/note.txt", explode)
    assert sorted(os.listdir(root / "a" / "b")) == ["note.txt"]
    assert (root / "a" / "b" / "note.txt").read_text() == "inside"


def test_create_exclusive_refuses_any_existing_name_even_a_dangling_link(world):
    tree, root, _ = world
    (root / "dangling").symlink_to("nowhere")
    with pytest.raises(FileExistsError):
        tree.create_exclusive("a/b/note.txt", b"x")
    with pytest.raises(FileExistsError):
        tree.create_exclusive("dangling", b"x")
    assert not (root / "nowhere").exists()
    tree.create_exclusive("a/new.txt", b"made")
    assert (root / "a" / "new.txt").read_bytes() == b"made"


def test_directories_entries_and_removal(world):
    tree, root, host = world
    tree.make_dirs("x/y/z")
    with pytest.raises(FileExistsError):
        tree.make_dirs("x/y/z", exist_ok=False)
    (root / "x" / "y" / "z" / "f").write_text("1")
    (root / "x" / "out").symlink_to("../../host")
    names = {entry.name: entry for entry in tree.entries("x")}
    assert set(names) == {"y", "out"} and names["y"].is_dir() and names["out"].is_symlink()
    tree.unlink("x/y/z/f")
    tree.rmdir("x/y/z")
    tree.remove_tree("x")  # the link to the host folder is removed, never followed
    assert not (root / "x").exists()
    assert (host / "secret.txt").read_text() == "HOST SECRET"


def test_rename_and_copy_by_descriptor(world):
    tree, root, _ = world
    tree.copy_file("a/b/note.txt", "copy.txt")
    assert (root / "copy.txt").read_text() == "inside"
    with pytest.raises(FileExistsError):
        tree.copy_file("a/b/note.txt", "copy.txt", overwrite=False)
    with pytest.raises(FileExistsError):
        tree.rename("copy.txt", "a/b/note.txt", overwrite=False)
    tree.rename("copy.txt", "a/moved.txt")
    assert (root / "a" / "moved.txt").read_text() == "inside" and not (root / "copy.txt").exists()
    tree.rename("a/moved.txt", "a/b/note.txt")
    assert sorted(os.listdir(root / "a" / "b")) == ["note.txt"]


def test_a_fifo_is_refused_without_blocking(world):
    tree, root, _ = world
    os.mkfifo(root / "pipe")
    with pytest.raises(PermissionError):
        tree.read_bytes("pipe")


def test_a_root_replaced_on_disk_is_the_one_the_next_call_sees(world, tmp_path):
    """The root is opened by its path at every call, never kept: a root moved away and
    made again (or removed) is seen at once, and nothing is served from the old one."""
    tree, root, _ = world
    assert tree.read_bytes("a/b/note.txt") == b"inside"
    assert {entry.name for entry in tree.entries("")} == {"a"}
    root.rename(tmp_path / "old_world")
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "note.txt").write_text("new world")
    (root / "fresh.txt").write_text("x")
    assert tree.read_bytes("a/b/note.txt") == b"new world"
    assert {entry.name for entry in tree.entries("")} == {"a", "fresh.txt"}
    assert tree.stat("fresh.txt").st_size == 1
    for path in (root / "a" / "b" / "note.txt", root / "fresh.txt"):
        path.unlink()
    for path in (root / "a" / "b", root / "a", root):
        path.rmdir()
    with pytest.raises(FileNotFoundError):
        tree.entries("")
    with pytest.raises(FileNotFoundError):
        tree.read_bytes("a/b/note.txt")


def test_a_folder_swapped_for_an_outward_link_after_a_listing_is_refused(world):
    tree, root, host = world
    assert {entry.name for entry in tree.entries("a/b")} == {"note.txt"}
    assert tree.read_bytes("a/b/note.txt") == b"inside"
    (root / "a" / "b" / "note.txt").unlink()
    (root / "a" / "b").rmdir()
    (root / "a" / "b").symlink_to(host)  # what a code_exec program can do between two calls
    with pytest.raises(OutsideRoot):
        tree.entries("a/b")
    with pytest.raises(OutsideRoot):
        tree.stat("a/b")
    with pytest.raises(OutsideRoot):
        tree.read_bytes("a/b/secret.txt")


def test_each_open_gets_its_own_flags_and_mode(world):
    """The kernel's open_how is made once per (flags, mode): a second mode, or the same flags
    without O_CREAT, must not get the first one's."""
    tree, root, _ = world
    previous = os.umask(0o022)
    try:
        for name, mode in (("p600", 0o600), ("p640", 0o640), ("p600b", 0o600), ("p644", 0o644)):
            os.close(tree.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode))
            assert stat.S_IMODE((root / name).stat().st_mode) == mode
    finally:
        os.umask(previous)
    with pytest.raises(FileExistsError):
        os.close(tree.open("p600", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    fd = tree.open("p640", os.O_RDONLY)
    try:
        with pytest.raises(OSError):
            os.write(fd, b"x")  # read-only, whatever the creating calls asked for
    finally:
        os.close(fd)


_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")


def test_swapping_a_folder_for_an_outward_link_never_lets_a_read_or_write_out(world):
    """The check-then-open race: a folder swapped with a link to the host, over and over."""
    tree, root, host = world
    (root / "a" / "b" / "secret.txt").write_text("world copy")
    (root / "swap").symlink_to("../host")
    stop = threading.Event()

    def swapper() -> None:
        while not stop.is_set():
            _exchange(root / "a" / "b", root / "swap")

    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    leaked = 0
    try:
        for index in range(2000):
            with _maybe():
                if tree.read_bytes("a/b/secret.txt") == b"HOST SECRET":
                    leaked += 1
            with _maybe():
                tree.create_exclusive(f"a/b/new{index}.txt", b"x")
            with _maybe():
                tree.write_atomic("a/b/secret.txt", b"world copy")
    finally:
        stop.set()
        thread.join()
    outside = len(set(os.listdir(host)) - {"secret.txt"})
    assert (leaked, outside) == (0, 0)
    assert (host / "secret.txt").read_text() == "HOST SECRET"


class _maybe:
    """Swallow the refusals the race produces (outside, absent, not a folder)."""

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        return kind is not None and issubclass(kind, OSError)


def test_an_absolute_link_to_the_roots_own_path_stays_inside(world):
    tree, root, host = world
    (root / "by_host_path").symlink_to(root / "a" / "b")
    (root / "file_by_host_path").symlink_to(root / "a" / "b" / "note.txt")
    (root / "by_alias").symlink_to("/sandboxroot/a/b/note.txt")
    (root / "alias_escape").symlink_to("/sandboxroot/../host/secret.txt")
    aliased = Root(root, aliases=("/sandboxroot",))
    assert tree.read_bytes("by_host_path/note.txt") == b"inside"
    assert tree.read_bytes("file_by_host_path") == b"inside"
    tree.write_atomic("file_by_host_path", b"through")
    assert (root / "a" / "b" / "note.txt").read_bytes() == b"through"
    assert aliased.read_bytes("by_alias") == b"through"
    with pytest.raises(OutsideRoot):
        tree.read_bytes("by_alias")  # without the alias it is just an absolute link
    with pytest.raises(OutsideRoot):
        aliased.read_bytes("alias_escape")
    # The bare functions know no anchors: every absolute link is refused.
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(OutsideRoot):
            beneath.read_bytes(fd, "by_host_path/note.txt")
    finally:
        os.close(fd)


def test_walk_lists_top_down_and_never_enters_a_link(world):
    tree, root, host = world
    (root / "a" / "to_host").symlink_to(host)
    (root / "a" / "to_b").symlink_to("b")
    seen = {parts: sorted(entry.name for entry in listed) for parts, listed in tree.walk("a")}
    assert seen == {(): ["b", "to_b", "to_host"], ("b",): ["note.txt"]}
    walk = tree.walk("")
    parts, listed = next(walk)
    listed[:] = [entry for entry in listed if entry.name != "a"]  # pruned like os.walk
    assert list(walk) == []
    with pytest.raises(OutsideRoot):
        list(tree.walk("a/to_host"))
