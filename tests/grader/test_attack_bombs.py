"""Decompression bombs against the grader (issue #26): an agent's world of many large files of
zeros (a few MB as a snapshot) must not be read into memory all at once, by the diff or by the
checks that look for files.

The caps are lowered here (``ExtractOptions``) so that the attack stays small; the defaults
(200 MiB a file, 512 MiB in all) bound the same code paths."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from atoll.benchmark import CellValueCheck, FileExistsCheck
from grader.checks import run_check
from grader.diff import diff_snapshots
from grader.extract import ExtractOptions
from grader.snapshot import Snapshot
from tests.grader import factories as f

MiB = 1024**2
FILES, SIZE = 12, 4 * MiB  # 48 MiB of zeros: ~50 KB compressed
OPTIONS = ExtractOptions(ocr=False, recalculate=False, max_file_bytes=8 * MiB, max_total_bytes=8 * MiB)


@pytest.fixture(scope="module")
def bomb(tmp_path_factory):
    """Before: a mailbox and a note. After: the agent's twelve 4 MiB files of zeros (each under
    the per-file cap) and a 12 MiB mailbox (over it)."""
    folder = tmp_path_factory.mktemp("bomb")
    zeros = bytes(SIZE)
    before = f.write_snapshot(
        folder / "before.tar.gz", {"filesystem/note.txt": "a", ".apps_data/mail/inbox.mbox": ""}
    )
    members: dict[str, bytes | str] = {f"filesystem/out/junk-{i:02}.xlsx": zeros for i in range(FILES)}
    members["filesystem/note.txt"] = "b"
    members[".apps_data/mail/inbox.mbox"] = bytes(3 * SIZE)
    after = f.write_snapshot(folder / "after.tar.gz", members)
    return Snapshot(before), Snapshot(after)


def _peak(work) -> tuple[object, int]:
    gc.collect()
    tracemalloc.start()
    try:
        result = work()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_diff_reads_no_more_than_its_total_cap(bomb):
    """Every changed file under the per-file cap was read at once: 48 MiB here, twenty 199 MiB
    files (4 GiB, past the grader's memory limit) with the defaults; the mailbox had no cap."""
    before, after = bomb
    diff, peak = _peak(lambda: diff_snapshots(before, after, OPTIONS))
    assert peak < 24 * MiB, f"the diff held {peak / MiB:.0f} MiB"
    notes = [artifact.text for artifact in diff.artifacts if (artifact.path or "").startswith("/out/")]
    assert any("total cap" in note for note in notes), notes
    assert any("inbox.mbox" in error and "app data not read" in error for error in diff.errors), diff.errors
    note = next(a for a in diff.artifacts if a.path == "/note.txt")
    assert note.text.rstrip().endswith("b")  # what fits is still read and shown


@pytest.mark.parametrize(
    "spec",
    [
        FileExistsCheck(file_type="xlsx", path="/out/*", contains=["revenue"]),
        CellValueCheck(path="/out/*.xlsx", cell="A1", value="1"),
    ],
    ids=["file_exists contains", "cell_value"],
)
def test_a_check_matching_many_files_reads_within_the_caps(bomb, spec):
    before, after = bomb
    world = diff_snapshots(before, after, OPTIONS)
    result, peak = _peak(lambda: run_check(spec, "", world, OPTIONS))
    assert peak < 24 * MiB, f"the check held {peak / MiB:.0f} MiB"
    assert result.passed is not True
    assert "total cap" in result.reason


@pytest.mark.parametrize("bomb_kind", ["bytes", "members"])
def test_the_grading_service_refuses_a_snapshot_past_what_a_world_holds(tmp_path, monkeypatch, bomb_kind):
    """Every member is hashed when a snapshot is opened: a gzip of terabytes of zeros (a few
    hundred MB, under the body limit) held a grading slot for hours. The caps (8 GiB, a
    million members: what the environment writes at most) are lowered here to keep it small."""
    import json
    import socket
    import threading
    import time

    import httpx
    import uvicorn

    from grader import snapshot
    from grader.service import create_app

    monkeypatch.setattr(snapshot, "MAX_BYTES", 1 * MiB, raising=False)
    monkeypatch.setattr(snapshot, "MAX_MEMBERS", 100, raising=False)
    members: dict[str, bytes | str] = (
        {"filesystem/zeros.bin": bytes(4 * MiB)}
        if bomb_kind == "bytes"
        else {f"filesystem/f{i:03}.txt": "" for i in range(200)}
    )
    before = f.write_snapshot(tmp_path / "b.tar.gz", {"filesystem/a.txt": "a"})
    after = f.write_snapshot(tmp_path / "a.tar.gz", members)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(None), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        task = f.task([{"verifier_id": "v1", "criteria": "c"}])
        with before.open("rb") as b, after.open("rb") as a:
            answer = httpx.post(
                f"http://127.0.0.1:{sock.getsockname()[1]}/grade",
                data={"task": task.model_dump_json(), "judge": json.dumps({"model": None})},
                files={"before": b, "after": a},
                timeout=30,
            )
    finally:
        server.should_exit = True
        thread.join(10)
    assert answer.status_code == 413, answer.text[:300]
    assert answer.json()["error"]["code"] == "snapshot_too_large"
