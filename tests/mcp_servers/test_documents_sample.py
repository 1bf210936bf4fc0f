"""Documents server on the sample worlds: every .docx reads, reference solutions replay to the gold files."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import docx
import pytest

from tests.mcp_servers.helpers import make_world, open_session
from tests.mcp_servers.test_documents import Docs
from tests.shared_sample import fresh_sample_benchmark

MODES = ("individual", "consolidated")


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory) -> Path:
    return fresh_sample_benchmark(tmp_path_factory.mktemp("sample") / "bench")


def extract_world(benchmark: Path, world_id: str, tmp_path: Path) -> Any:
    world = make_world(tmp_path)
    with zipfile.ZipFile(benchmark / "world_files_zipped" / f"{world_id}.zip") as archive:
        for member in archive.infolist():
            if member.is_dir() or not member.filename.startswith("filesystem/"):
                continue
            target = world.fs_root / member.filename[len("filesystem/") :]
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, target.open("wb") as sink:
                shutil.copyfileobj(source, sink)
    return world


def document_steps(benchmark: Path) -> list[tuple[str, str, list[dict[str, Any]]]]:
    tasks = json.loads((benchmark / "tasks_and_rubrics.json").read_text())
    found = []
    for task in tasks:
        steps = [s for s in task["reference_solution"]["steps"] if s["tool"].startswith("documents_")]
        if steps:
            found.append((task["task_id"], task["world_id"], steps))
    return found


def paragraph_texts(path: Path) -> list[str]:
    return [p.text for p in docx.Document(str(path)).paragraphs]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_every_sample_docx_reads_in_both_modes(benchmark, tmp_path, mode):
    worlds = sorted(p.stem for p in (benchmark / "world_files_zipped").glob("*.zip"))
    read = 0
    for world_id in worlds:
        world = extract_world(benchmark, world_id, tmp_path / world_id)
        with open_session("documents", world, mode=mode) as session:
            docs = Docs(session, mode)
            for path in sorted(world.fs_root.rglob("*.docx")):
                virtual = "/" + path.relative_to(world.fs_root).as_posix()
                data = docs.ok("read_document_content", file_path=virtual)
                expected = [t for t in paragraph_texts(path)]
                got = [b["text"] for b in data["blocks"] if b["type"] != "table"]
                assert got == expected, virtual
                docs.ok("get_document_overview", file_path=virtual)
                docs.ok("comments", file_path=virtual)
                read += 1
    assert read >= 5


@pytest.mark.parametrize("mode", MODES)
def test_reference_solutions_reproduce_the_gold_documents(benchmark, tmp_path, mode):
    cases = document_steps(benchmark)
    assert {task_id for task_id, _w, _s in cases} >= {
        "keystone-06-interview-summary",
        "atlas-06-disclosure-schedule",
    }
    for task_id, world_id, steps in cases:
        world = extract_world(benchmark, world_id, tmp_path / task_id)
        with open_session("documents", world, mode=mode) as session:
            docs = Docs(session, mode)
            for step in steps:
                docs.ok(step["tool"].removeprefix("documents_"), **step["arguments"])
        golds = sorted((benchmark / "gold_files" / task_id).rglob("*.docx"))
        assert golds, f"{task_id}: no gold .docx to compare with"
        for gold in golds:
            ours = next(world.fs_root.rglob(gold.name))
            assert paragraph_texts(ours) == paragraph_texts(gold), f"{task_id}: {gold.name}"
