"""The generator's layout guarantees: APEX files, counts, output types, domains, determinism."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from atoll import OutputType, Task, World
from atoll.errors import AtollError
from atoll.loader import load_benchmark, summarize
from atoll_sample import generate_sample_benchmark

from .conftest import CONSULTING, DEAL

# Gateway tools the reference solutions may call, with the arguments each requires
# (the shapes agreed in notes/interfaces.md).
REFERENCE_TOOLS = {
    "spreadsheets_read_tab": {"file_path", "tab_index"},
    "spreadsheets_read_csv": {"file_path"},
    "spreadsheets_create_spreadsheet": {"directory", "file_name", "sheets"},
    "spreadsheets_edit_spreadsheet": {"file_path", "operations"},
    "documents_read_document_content": {"file_path"},
    "documents_create_document": {"directory", "file_name", "content"},
    "documents_edit_content_text": {"file_path", "identifier", "new_text"},
    "presentations_create_deck": {"directory", "file_name", "slides"},
    "presentations_edit_slides": {"file_path", "operations"},
    "presentations_read_completedeck": {"file_path"},
    "mail_search_mail": set(),
    "mail_send_mail": {"from_email", "to_email", "subject", "body"},
    "calendar_list_events": set(),
    "calendar_create_event": {"summary", "start", "end"},
    "chat_get_channel_history": {"channel_id"},
    "chat_post_message": {"channel_id", "message"},
    "filesystem_read_text_file": {"file_path"},
    "pdfs_read_pdf_pages": {"file_path"},
    "market_data_get_quote": {"symbol"},
    "market_data_get_company_profile": {"symbol"},
}


def _digests(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_writes_the_apex_layout(sample_dir):
    names = {p.name for p in sample_dir.iterdir()}
    assert {
        "tasks_and_rubrics.json",
        "world_descriptions.json",
        "world_files_zipped",
        "task_files",
        "gold_files",
    } <= names
    for archive in (sample_dir / "world_files_zipped").glob("*.zip"):
        with zipfile.ZipFile(archive) as bundle:
            tops = {name.split("/", 1)[0] for name in bundle.namelist()}
        assert tops == {"filesystem", ".apps_data"}, archive.name


def test_worlds_validate_and_name_their_user(sample_dir):
    records = json.loads((sample_dir / "world_descriptions.json").read_text(encoding="utf-8"))
    worlds = [World.model_validate(r) for r in records]
    assert {w.world_id for w in worlds} == {CONSULTING, DEAL}
    for world in worlds:
        assert "@" in world.user_email and world.user_name
        assert (sample_dir / "world_files_zipped" / f"{world.world_id}.zip").is_file()


def test_tasks_cover_every_output_type_and_three_domains(tasks):
    validated = [Task.model_validate(t) for t in tasks.values()]
    assert len(validated) >= 12
    assert {t.expected_output for t in validated} == set(OutputType)
    assert {t.domain for t in validated} == {"Management Consulting", "Investment Banking", "Law"}
    assert {t.world_id for t in validated} == {CONSULTING, DEAL}


def test_every_task_has_one_to_six_criteria_and_a_checked_one(tasks):
    kinds = Counter()
    judge_only = 0
    for task in tasks.values():
        assert 1 <= len(task["rubric"]) <= 6, task["task_id"]
        assert any(c.get("check") for c in task["rubric"]), task["task_id"]
        assert len({c["verifier_id"] for c in task["rubric"]}) == len(task["rubric"])
        for criterion in task["rubric"]:
            if criterion.get("check"):
                kinds[criterion["check"]["kind"]] += 1
            else:
                judge_only += 1
    assert set(kinds) == {
        "answer_number",
        "answer_regex",
        "cell_value",
        "file_exists",
        "email_sent",
        "event_created",
        "chat_posted",
        "coworker_contacted",
    }
    assert judge_only >= 2


def test_tasks_use_the_published_v1_fields(tasks):
    for task in tasks.values():
        assert task["gold_response_type"] in ("text", "file"), task["task_id"]
        assert "gold_output" not in task
        if task["gold_response_type"] == "file":
            assert re.fullmatch(r"snap_[0-9a-f]{32}", task["gold_response"]), task["task_id"]
        else:
            assert task["gold_response"] == task["reference_solution"]["final_answer"]
        assert task["task_input_files"] is None or re.fullmatch(
            r"snap_[0-9a-f]{32}", task["task_input_files"]
        )


def test_file_tasks_have_gold_files_on_disk(sample_dir, tasks):
    benchmark = load_benchmark(sample_dir)
    for task in tasks.values():
        gold = benchmark.task(task["task_id"]).gold_output
        if task["expected_output"] != "message_in_console":
            assert task["gold_response_type"] == "file" and gold.files, task["task_id"]
        for file in gold.files:
            source = Path(file.model_extra["source"])
            assert source.is_file() and source.stat().st_size > 0, file
            assert source == sample_dir / "gold_files" / task["task_id"] / "filesystem" / file.path.lstrip(
                "/"
            )


def test_edit_tasks_target_files_that_exist_in_the_world(sample_dir, tasks, worlds):
    benchmark = load_benchmark(sample_dir)
    for task in tasks.values():
        if not task["expected_output"].startswith("edit_existing"):
            continue
        for file in benchmark.task(task["task_id"]).gold_output.files:
            assert (worlds[task["world_id"]] / "filesystem" / file.path.lstrip("/")).is_file(), file.path


def test_the_deal_world_lists_market_data_apps_and_carries_their_fixtures(sample_dir):
    summary = summarize(load_benchmark(sample_dir))
    assert summary["unavailable_apps"] == []
    records = {w["world_id"]: w for w in json.loads((sample_dir / "world_descriptions.json").read_text())}
    names = {app["service_name"] for app in records[DEAL]["apps"]}
    assert {"Edgar SEC", "FMP", "Excel", "Word"} <= names and len(records[CONSULTING]["apps"]) == 9


def test_reference_solutions_use_agreed_tool_shapes(tasks):
    for task in tasks.values():
        reference = task["reference_solution"]
        assert reference["final_answer"].strip()
        assert reference["steps"], task["task_id"]
        for step in reference["steps"]:
            assert step["tool"] in REFERENCE_TOOLS, step["tool"]
            assert REFERENCE_TOOLS[step["tool"]] <= set(step["arguments"]), (task["task_id"], step)
            for key, value in step["arguments"].items():
                if key in ("file_path", "directory"):
                    assert value.startswith("/"), value
            if step["tool"] == "spreadsheets_edit_spreadsheet":
                assert all({"type", "sheet"} <= set(op) for op in step["arguments"]["operations"])
            if step["tool"] == "documents_edit_content_text":
                assert re.fullmatch(r"body\.p\.\d+", step["arguments"]["identifier"])


def test_a_task_brings_its_own_input_files(sample_dir, tasks):
    with_inputs = [t for t in tasks.values() if t.get("task_input_files")]
    assert with_inputs
    for task in with_inputs:
        assert re.fullmatch(r"snap_[0-9a-f]{32}", task["task_input_files"])  # a snapshot id, as in v1
        folder = sample_dir / "task_files" / task["task_id"] / "filesystem"
        assert [p for p in folder.rglob("*") if p.is_file()], task["task_id"]


def test_same_seed_gives_byte_identical_output(sample_dir, tmp_path):
    again = generate_sample_benchmark(tmp_path / "again", seed=0)
    assert _digests(again) == _digests(sample_dir)


def test_another_seed_changes_the_numbers(sample_dir, tmp_path):
    other = generate_sample_benchmark(tmp_path / "other", seed=7)
    first = json.loads((sample_dir / "tasks_and_rubrics.json").read_text())
    second = json.loads((other / "tasks_and_rubrics.json").read_text())
    assert [t["task_id"] for t in first] == [t["task_id"] for t in second]
    assert first != second


def test_regenerating_replaces_only_its_own_entries(tmp_path):
    out = tmp_path / "bench"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    (out / "gold_files" / "stale-task").mkdir(parents=True)
    generate_sample_benchmark(out)
    assert (out / "notes.txt").read_text() == "keep me"
    assert not (out / "gold_files" / "stale-task").exists()


def test_refuses_a_file_as_output_directory(tmp_path):
    target = tmp_path / "occupied"
    target.write_text("x")
    with pytest.raises(AtollError, match="not a directory"):
        generate_sample_benchmark(target)


def test_output_does_not_depend_on_the_machine_time_zone(sample_dir, tmp_path):
    out = tmp_path / "tokyo"
    code = (
        f"from atoll_sample import generate_sample_benchmark; generate_sample_benchmark({str(out)!r}, seed=0)"
    )
    subprocess.run(
        [sys.executable, "-c", code], check=True, env={**os.environ, "TZ": "Asia/Tokyo"}, timeout=120
    )
    assert _digests(out) == _digests(sample_dir)
