"""Malicious archives: each is refused with a 4xx naming the member, nothing outside the root changes,
and the world itself is left exactly as it was (populate is all-or-nothing)."""

from __future__ import annotations

import io
import os
import stat
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from environment import EnvironmentSettings
from tests.environment.factories import guarded_world, link_member, tar_gz, tree


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the world that no archive may touch."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("do not read or overwrite")
    return folder


@pytest.fixture
def strict(tmp_path: Path, outside: Path) -> Iterator[tuple[httpx.Client, EnvironmentSettings]]:
    with guarded_world(
        tmp_path, max_archive_bytes=2 * 1024**2, max_archive_members=50, max_compression_ratio=50
    ) as served:
        yield served


def _special(name: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.devmajor, info.devminor = 1, 3
    return info


def _zip(entries: list[tuple[str, bytes, int | None]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content, mode in entries:
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED  # a ZipInfo alone means "stored"
            if mode is not None:
                info.external_attr = mode << 16
            archive.writestr(info, content)
    return buffer.getvalue()


def _cases(outside: Path) -> dict[str, tuple[bytes, str, int]]:
    """name -> (archive bytes, member the error must name, expected status)."""
    return {
        "absolute path": (tar_gz([(f"{outside}/pwned.txt", b"x")]), f"{outside}/pwned.txt", 400),
        "dot-dot": (tar_gz([("../../outside/pwned.txt", b"x")]), "../../outside/pwned.txt", 400),
        "dot-dot inside a path": (
            tar_gz([("a/../../../outside/p.txt", b"x")]),
            "a/../../../outside/p.txt",
            400,
        ),
        "symlink to an absolute path": (tar_gz([link_member("escape", str(outside))]), "escape", 400),
        "symlink climbing out": (
            tar_gz([("ok.txt", b"1"), link_member("docs/up", "../../../outside")]),
            "docs/up",
            400,
        ),
        "symlink then write through it": (
            tar_gz([link_member("escape", str(outside)), ("escape/pwned.txt", b"x")]),
            "escape",
            400,
        ),
        "hardlink to an absolute path": (
            tar_gz([link_member("copy", f"{outside}/secret.txt", tarfile.LNKTYPE)]),
            "copy",
            400,
        ),
        "hardlink climbing out": (
            tar_gz([link_member("copy", "../../outside/secret.txt", tarfile.LNKTYPE)]),
            "copy",
            400,
        ),
        "character device": (tar_gz([_special("null", tarfile.CHRTYPE)]), "null", 400),
        "block device": (tar_gz([_special("disk", tarfile.BLKTYPE)]), "disk", 400),
        "fifo": (tar_gz([_special("pipe", tarfile.FIFOTYPE)]), "pipe", 400),
        "decompression bomb": (tar_gz([("zeros.bin", bytes(1900 * 1024))]), "zeros.bin", 413),
        "too many bytes": (tar_gz([("big.bin", os.urandom(3 * 1024**2))]), "big.bin", 413),
        "too many members": (tar_gz([(f"f{i:03}.txt", b"x") for i in range(60)]), "f050.txt", 413),
        "reserved staging name": (
            tar_gz([(".atoll-staging-x/hidden.txt", b"x")]),
            ".atoll-staging-x/hidden.txt",
            400,
        ),
        "zip dot-dot": (_zip([("../../outside/pwned.txt", b"x", None)]), "../../outside/pwned.txt", 400),
        "zip absolute path": (_zip([(f"{outside}/pwned.txt", b"x", None)]), f"{outside}/pwned.txt", 400),
        "zip symlink out": (_zip([("escape", str(outside).encode(), stat.S_IFLNK | 0o777)]), "escape", 400),
        "zip symlink bomb": (_zip([("link", bytes(50 * 1024**2), stat.S_IFLNK | 0o777)]), "link", 400),
    }


CASE_NAMES = list(_cases(Path("/x")))


@pytest.mark.parametrize("case", CASE_NAMES)
def test_malicious_archive_is_refused_and_nothing_changes(case, strict, outside, tmp_path):
    http, settings = strict
    archive, member, status = _cases(outside)[case]
    outside_before, world_before = tree(outside), tree(tmp_path / "world")
    reply = http.post("/data/populate", files={"archive": ("world.tar.gz", archive)})
    assert reply.status_code == status, reply.text
    detail = reply.json()["detail"]
    assert detail["member"] == member and repr(member) in detail["error"]
    assert tree(outside) == outside_before
    assert tree(tmp_path / "world") == world_before  # all-or-nothing: no partial world, no staging left
    assert not (tmp_path / "pwned.txt").exists() and not Path("/pwned.txt").exists()


def test_symlink_planted_in_the_world_is_replaced_not_followed(strict, outside, tmp_path):
    http, settings = strict
    os.symlink(outside, settings.fs_root / "docs")  # e.g. made by the agent through code_exec
    outside_before = tree(outside)
    reply = http.post(
        "/data/populate", files={"archive": ("w.tar.gz", tar_gz([("docs/evil.txt", b"payload")]))}
    )
    assert reply.status_code == 200, reply.text
    assert tree(outside) == outside_before
    docs = settings.fs_root / "docs"
    assert docs.is_dir() and not docs.is_symlink()
    assert (docs / "evil.txt").read_bytes() == b"payload"


def test_symlinks_inside_the_world_and_hardlinks_to_earlier_members_are_kept(strict):
    http, settings = strict
    archive = tar_gz(
        [
            ("data/report.txt", b"numbers"),
            link_member("data/latest.txt", "report.txt"),
            link_member("data/copy.txt", "data/report.txt", tarfile.LNKTYPE),
        ]
    )
    reply = http.post("/data/populate", files={"archive": ("w.tar.gz", archive)})
    assert reply.status_code == 200, reply.text
    data = settings.fs_root / "data"
    assert os.readlink(data / "latest.txt") == "report.txt"
    assert (data / "copy.txt").read_bytes() == b"numbers" and not (data / "copy.txt").is_symlink()


@pytest.mark.parametrize(
    "payload, problem",
    [(b"not an archive at all", "not a tar, tar.gz or zip"), (tar_gz([("a.txt", b"x" * 5000)])[:-40], "")],
    ids=["garbage", "truncated"],  # the gzip header holds a time: ids must not (pytest-xdist)
)
def test_garbage_and_truncated_archives_are_400(strict, tmp_path, payload, problem):
    http, _ = strict
    world_before = tree(tmp_path / "world")
    reply = http.post("/data/populate", files={"archive": ("w.tar.gz", payload)})
    assert reply.status_code == 400, reply.text
    assert problem in reply.json()["detail"]["error"]
    assert tree(tmp_path / "world") == world_before


def test_bad_subsystem_is_refused(strict):
    http, _ = strict
    for subsystem in ("../etc", "filesystem/../../etc", "/etc", "home"):
        reply = http.post(
            "/data/populate", params={"subsystem": subsystem}, files={"archive": ("w.tar.gz", tar_gz([]))}
        )
        assert reply.status_code == 400, (subsystem, reply.text)
        assert repr(subsystem) in reply.json()["detail"]["error"]


def _multipart(archive: bytes) -> tuple[bytes, str]:
    boundary = "atoll-test-boundary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="archive"; filename="w.tar.gz"\r\n'
        "Content-Type: application/gzip\r\n\r\n"
    )
    return (
        head.encode() + archive + f"\r\n--{boundary}--\r\n".encode(),
        f"multipart/form-data; boundary={boundary}",
    )


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_an_upload_too_big_to_fit_the_limit_is_refused_before_it_fills_the_disk(strict, tmp_path, declared):
    http, settings = strict
    # 2 MiB may be written; no archive of that can exceed 2 MiB + 5% + 1 MiB, so 5 MiB of
    # incompressible data is refused from its size alone (uploads are spooled before extraction).
    limit = settings.max_archive_bytes + settings.max_archive_bytes // 20 + 1024**2
    body, content_type = _multipart(tar_gz([("big.bin", os.urandom(5 * 1024**2))]))
    content = body if declared else (body[i : i + 65536] for i in range(0, len(body), 65536))
    world_before = tree(tmp_path / "world")
    reply = http.post("/data/populate", content=content, headers={"content-type": content_type})
    assert reply.status_code == 413, reply.text
    detail = reply.json()["detail"]
    assert detail["code"] == "archive_too_large" and detail["member"] is None
    assert f"larger than {limit} bytes" in detail["error"]
    assert tree(tmp_path / "world") == world_before


def test_a_streamed_zip_too_big_to_fit_the_limit_is_not_spooled_whole(strict, tmp_path):
    http, settings = strict
    limit = settings.max_archive_bytes + settings.max_archive_bytes // 20 + 1024**2
    archive = _zip([("big.bin", os.urandom(5 * 1024**2), None)])
    world_before = tree(tmp_path / "world")
    # A raw body is not seekable: a zip from it is copied to a spool file, which stops at the cap.
    reply = http.post("/data/populate", content=archive, headers={"content-type": "application/zip"})
    assert reply.status_code == 413, reply.text
    detail = reply.json()["detail"]
    assert detail["code"] == "archive_too_large" and f"larger than {limit} bytes" in detail["error"]
    assert "zip source" in detail["error"]
    assert tree(tmp_path / "world") == world_before
