"""Presentations server on the sample worlds: every .pptx reads, reference solutions replay to the gold decks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pptx import Presentation

from tests.mcp_servers.helpers import open_session
from tests.mcp_servers.test_documents_sample import extract_world
from tests.mcp_servers.test_presentations import Slides
from tests.shared_sample import fresh_sample_benchmark

MODES = ("individual", "consolidated")


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory) -> Path:
    return fresh_sample_benchmark(tmp_path_factory.mktemp("sample") / "bench")


def deck_texts(path: Path) -> list[list[str]]:
    """Per slide, the text of every text frame and table cell, in shape order."""
    slides = []
    for slide in Presentation(str(path)).slides:
        texts = []
        for shape in slide.shapes:
            if shape.has_text_frame:
                texts.append(shape.text_frame.text)
            if shape.has_table:
                texts.extend(cell.text for row in shape.table.rows for cell in row.cells)
        slides.append(texts)
    return slides


@pytest.mark.parametrize("mode", MODES)
def test_every_sample_pptx_reads_in_both_modes(benchmark, tmp_path, mode):
    read = 0
    for world_zip in sorted((benchmark / "world_files_zipped").glob("*.zip")):
        world = extract_world(benchmark, world_zip.stem, tmp_path / world_zip.stem)
        with open_session("presentations", world, mode=mode) as session:
            slides = Slides(session, mode)
            for path in sorted(world.fs_root.rglob("*.pptx")):
                virtual = "/" + path.relative_to(world.fs_root).as_posix()
                data = slides.ok("read_completedeck", file_path=virtual)
                assert data["slide_count"] == len(Presentation(str(path)).slides)
                markdown = slides.text("read_completedeck", file_path=virtual)
                for texts in deck_texts(path):
                    for text in texts:
                        for line in text.splitlines():
                            assert line.strip() in markdown, (virtual, line)
                slides.ok("read_individualslide", file_path=virtual, slide_index=0)
                read += 1
    assert read >= 3


@pytest.mark.parametrize("mode", MODES)
def test_reference_solutions_reproduce_the_gold_decks(benchmark, tmp_path, mode):
    tasks = json.loads((benchmark / "tasks_and_rubrics.json").read_text())
    replayed = set()
    for task in tasks:
        steps = [s for s in task["reference_solution"]["steps"] if s["tool"].startswith("presentations_")]
        if not steps:
            continue
        world = extract_world(benchmark, task["world_id"], tmp_path / task["task_id"])
        with open_session("presentations", world, mode=mode) as session:
            slides = Slides(session, mode)
            for step in steps:
                slides.ok(step["tool"].removeprefix("presentations_"), **step["arguments"])
        golds = sorted((benchmark / "gold_files" / task["task_id"]).rglob("*.pptx"))
        assert golds, f"{task['task_id']}: no gold .pptx to compare with"
        for gold in golds:
            ours = next(world.fs_root.rglob(gold.name))
            assert deck_texts(ours) == deck_texts(gold), f"{task['task_id']}: {gold.name}"
        replayed.add(task["task_id"])
    assert {
        "keystone-05-fill-steerco-draft",
        "atlas-03-board-deck-offer",
        "keystone-04-steerco-preread",
    } <= replayed
