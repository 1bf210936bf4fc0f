"""Grading stored worlds: a seed manifest and a trial's delta are read in place, the diff comes
from the manifests, and only the files the agent changed are ever read."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import httpx
import pytest

from atoll.errors import AtollError
from atoll.grade import Verdict
from atoll.world_manifest import Entry, WorldManifest
from atoll.world_store import open_world, seed_manifest_key
from grader import grade_trial
from grader.diff import diff_snapshots
from grader.snapshot import MAX_MEMBERS, ManifestSnapshot, Snapshot, open_snapshot
from tests.atoll.world_factories import delta_bytes, make_world, snapshot_bytes, store_seed
from tests.grader import factories as f

DELTA_KEY = "exp/t1/agent/run-0/attempt-1/after.delta.tar.gz"
SEED = {
    **{f"filesystem/archive/doc{i}.txt": f"old document {i}\n" * 20 for i in range(30)},
    "filesystem/Reports/summary.txt": "Profit: 10\n",
    ".apps_data/mail/inbox.mbox": "",
}


@pytest.fixture
def stored_trial(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """(store root, seed manifest, delta, after archive) of a trial that edited one file and
    wrote a new one."""
    store = tmp_path / "artifacts"
    store.mkdir()
    seed = snapshot_bytes(make_world(tmp_path / "seed", SEED))
    _uri, base = store_seed(store, "w1", seed)
    after_files = {
        **SEED,
        "filesystem/Reports/summary.txt": "Profit: 40\n",
        "filesystem/Reports/memo.md": "Done.",
    }
    after = snapshot_bytes(make_world(tmp_path / "after", after_files))
    delta = store / DELTA_KEY
    delta.parent.mkdir(parents=True)
    delta.write_bytes(delta_bytes(after, base, delta_key=DELTA_KEY, base_key=seed_manifest_key("w1")))
    (tmp_path / "before.tar.gz").write_bytes(seed)
    (tmp_path / "after.tar.gz").write_bytes(after)
    return store, store / seed_manifest_key("w1"), delta, tmp_path / "after.tar.gz"


class _Counting:
    """A stored world's read_blobs that records every sha256 asked for."""

    def __init__(self, location: Path, root: Path) -> None:
        self.world = open_world(location, root=str(root))
        self.asked: list[str] = []

    def __call__(self, wanted: Iterable[str]) -> dict[str, bytes]:
        wanted = list(wanted)
        self.asked.extend(wanted)
        return self.world.read_blobs(wanted)

    def snapshot(self) -> ManifestSnapshot:
        assert self.world.manifest is not None
        return ManifestSnapshot(self.world.manifest, self, location=str(self.world.uri))


def test_the_diff_of_stored_worlds_reads_only_the_changed_blobs(stored_trial) -> None:
    store, seed, delta, after_archive = stored_trial
    before_reads, after_reads = _Counting(seed, store), _Counting(delta, store)

    diff = diff_snapshots(before_reads.snapshot(), after_reads.snapshot())

    changed = {(c.path, c.change) for c in diff.changes.files}
    assert changed == {
        ("filesystem/Reports/summary.txt", "modified"),
        ("filesystem/Reports/memo.md", "created"),
    }
    entries = after_reads.snapshot().entries
    # The old summary is read from the seed, the new files from the delta; nothing else.
    assert set(before_reads.asked) == {
        before_reads.snapshot().entries["filesystem/Reports/summary.txt"].sha256
    }
    assert set(after_reads.asked) == {
        entries["filesystem/Reports/summary.txt"].sha256,
        entries["filesystem/Reports/memo.md"].sha256,
    }
    # The same changes as the full archives give.
    full = diff_snapshots(Snapshot(after_archive.parent / "before.tar.gz"), Snapshot(after_archive))
    assert full.changes == diff.changes
    assert [a.text for a in full.artifacts] == [a.text for a in diff.artifacts]


async def test_grade_trial_takes_a_seed_manifest_and_a_delta_by_path(stored_trial) -> None:
    store, seed, delta, after_archive = stored_trial
    task = f.task(
        [
            {"verifier_id": "v1", "criteria": "memo", "check": {"kind": "file_exists", "file_type": "md"}},
            {
                "verifier_id": "v2",
                "criteria": "summary",
                "check": {"kind": "file_exists", "file_type": "txt", "contains": ["Profit: 40"]},
            },
        ]
    )
    stored = await grade_trial(task, seed, delta, f.trajectory("done"))  # root inferred
    full = await grade_trial(
        task, after_archive.parent / "before.tar.gz", after_archive, f.trajectory("done")
    )
    assert [v.verdict for v in stored.criteria] == [Verdict.met, Verdict.met]
    assert stored.changes == full.changes
    assert [v.verdict for v in stored.criteria] == [v.verdict for v in full.criteria]


def test_open_snapshot_reads_each_kind(stored_trial) -> None:
    store, seed, delta, after_archive = stored_trial
    with open_snapshot(delta, root=str(store)) as stored, open_snapshot(after_archive) as archive:
        assert isinstance(stored, ManifestSnapshot) and isinstance(archive, Snapshot)
        assert stored.entries == archive.entries
        assert stored.read("filesystem/Reports/memo.md") == b"Done."
        assert stored.filesystem_paths() == archive.filesystem_paths()
    with pytest.raises(AtollError) as refused:
        open_snapshot(delta, root=str(delta.parent))  # the seed lies outside this root
    assert refused.value.code == "bad_world_reference"


def test_a_manifest_past_the_member_cap_is_refused(monkeypatch) -> None:
    monkeypatch.setattr("grader.snapshot.MAX_MEMBERS", 2)
    entries = [Entry(path=f"filesystem/f{i}", type="file", size=1, sha256="0" * 64) for i in range(3)]
    with pytest.raises(AtollError) as refused:
        ManifestSnapshot(WorldManifest(entries=entries), lambda wanted: {}, location="m.json")
    assert refused.value.code == "snapshot_too_large" and "filesystem/f2" in refused.value.message
    assert MAX_MEMBERS == 1_000_000  # the cap itself is the archive reader's


def test_a_blob_shorter_than_its_entry_is_refused() -> None:
    import hashlib

    data = b"short"
    digest = hashlib.sha256(data).hexdigest()
    manifest = WorldManifest(entries=[Entry(path="filesystem/a.txt", type="file", size=99, sha256=digest)])
    snapshot = ManifestSnapshot(manifest, lambda wanted: {digest: data}, location="m.json")
    with pytest.raises(AtollError, match="not 99 bytes"):
        snapshot.read("filesystem/a.txt")


def _atoll(*args: str):
    from typer.testing import CliRunner

    from atoll_cli.cli import app

    return CliRunner().invoke(app, list(args))


def test_atoll_grade_takes_a_manifest_and_a_delta(stored_trial, tmp_path: Path) -> None:
    store, seed, delta, _after = stored_trial
    rubric = tmp_path / "rubric.json"
    check = {"kind": "file_exists", "file_type": "md", "contains": ["done"]}
    rubric.write_text(json.dumps([{"verifier_id": "v1", "criteria": "memo", "check": check}]))
    common = (
        "grade",
        "--rubric",
        str(rubric),
        "--before",
        str(seed),
        "--after",
        str(delta),
        "--answer",
        "ok",
    )

    inferred = _atoll(*common, "--output", str(tmp_path / "grade.json"))
    assert inferred.exit_code == 0, inferred.output
    grade = json.loads((tmp_path / "grade.json").read_text())
    assert grade["criteria"][0]["verdict"] == "met"
    assert {c["path"] for c in grade["changes"]["files"]} == {
        "filesystem/Reports/summary.txt",
        "filesystem/Reports/memo.md",
    }
    given = _atoll(*common, "--store", str(store), "--output", str(tmp_path / "again.json"))
    assert given.exit_code == 0 and json.loads((tmp_path / "again.json").read_text()) == grade
    # A root the stored worlds' references lead out of: refused, naming the reference (the
    # CLI's entry point prints it as one line with exit status 2).
    narrow = _atoll(*common, "--store", str(delta.parent), "--output", str(tmp_path / "no.json"))
    assert isinstance(narrow.exception, AtollError) and narrow.exception.code == "bad_world_reference"
    assert "leads outside the artifact store" in narrow.exception.message


def test_the_grading_service_takes_full_archives_only(stored_trial, tmp_path: Path) -> None:
    from grader.service import create_app
    from tests.served_app import ServedApp

    store, seed, delta, after_archive = stored_trial
    task = f.task(
        [{"verifier_id": "v1", "criteria": "memo", "check": {"kind": "file_exists", "file_type": "md"}}]
    )
    served = ServedApp(create_app(None))
    with served:

        def post(before: Path, after: Path) -> httpx.Response:
            with before.open("rb") as b, after.open("rb") as a:
                return httpx.post(
                    f"{served.url}/grade",
                    data={"task": task.model_dump_json()},
                    files={"before": b, "after": a},
                    timeout=60,
                )

        assert post(after_archive.parent / "before.tar.gz", after_archive).status_code == 200
        for before, after, field in ((seed, after_archive, "before"), (after_archive, delta, "after")):
            refused = post(before, after)
            assert refused.status_code == 400, refused.text
            assert refused.json()["error"]["message"].startswith(f"field {field}: a stored world")
