"""The v1.1 layout (Harbor task folders, mercor/apex-agents-v1.1) loads into the same
Benchmark model as v1, detected by itself; a part that cannot be mapped is named."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from atoll.errors import AtollError
from atoll.loader import load_benchmark, summarize
from atoll_cli.cli import app
from grader.gold import build_gold_world
from tests.atoll import apex_replica as replica


@pytest.fixture()
def v11_dir(tmp_path: Path) -> Path:
    return replica.write_v11_directory(tmp_path / "apex-agents-v1.1")


def test_tasks_worlds_rubrics_and_gold_load_like_v1(v11_dir, tmp_path):
    benchmark = load_benchmark(v11_dir)
    v1 = load_benchmark(replica.write_directory(tmp_path / "v1"))
    assert benchmark.layout == "apex-v1.1"
    assert [t.task_id for t in benchmark.tasks] == [t.task_id for t in v1.tasks]
    for task in v1.tasks:
        loaded = benchmark.task(task.task_id)
        assert (loaded.task_name, loaded.domain, loaded.world_id) == (
            task.task_name,
            task.domain,
            task.world_id,
        )
        assert loaded.prompt == task.prompt  # Harbor's environment preamble removed
        assert [(c.verifier_id, c.criteria) for c in loaded.rubric] == [
            (c.verifier_id, c.criteria) for c in task.rubric
        ]
        assert loaded.grading_target_for(loaded.rubric[0]) == task.grading_target_for(task.rubric[0])
        assert (loaded.gold_output.answer, [f.path for f in loaded.gold_output.files]) == (
            task.gold_output.answer,
            [f.path for f in task.gold_output.files],
        )
    file_task = benchmark.task(replica.FILE_TASK)
    assert file_task.model_extra["harbor_task"]["agent"]["timeout_sec"] == 3600  # every field kept
    overlay = Path(benchmark.task_overlays[replica.FILE_TASK])
    assert (overlay / "filesystem" / "Trackers" / "tariffs.xlsx").is_file()
    assert set(benchmark.world_seeds[replica.LAW_WORLD]) == {"filesystem", ".apps_data"}


def test_world_apps_come_from_its_mcp_config_and_are_reported(v11_dir):
    summary = summarize(load_benchmark(v11_dir, verify_archives=True))
    assert summary["layout"] == "apex-v1.1"
    assert {e["app"] for e in summary["unavailable_apps"]} == {"edgar_sec", "fmp_server"}
    assert summary["tasks_needing_unavailable_apps"] == sorted([replica.IB_TASK, replica.NULL_OUTPUT_TASK])
    law = next(w for w in summary["worlds"] if w["world_id"] == replica.LAW_WORLD)
    assert (law["files"], law["app_data_files"]) == (1, 1)
    assert summary["tasks_with_gold_output"] == 4 and summary["gold_files"] == 1


def test_bench_load_detects_the_layout(v11_dir):
    result = CliRunner().invoke(app, ["bench", "load", str(v11_dir), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["layout"] == "apex-v1.1"


def test_the_gold_world_is_built_from_the_per_subsystem_seeds(v11_dir, tmp_path):
    benchmark = load_benchmark(v11_dir)
    gold = build_gold_world(benchmark, benchmark.task(replica.FILE_TASK), tmp_path / "gold")
    with tarfile.open(gold.before) as before, tarfile.open(gold.after) as after:
        assert "filesystem/Contracts/supply_agreement.txt" in before.getnames()
        assert ".apps_data/mail/inbox.mbox" in before.getnames()
        assert "filesystem/Trackers/tariffs.xlsx" in after.getnames()


def _without_ids(folder: Path) -> None:
    (folder / "task.toml").write_text("[task]\nname = 'x'\n")
    config = json.loads((folder / "tests" / "grading_config.json").read_text())
    config.pop("metadata")
    (folder / "tests" / "grading_config.json").write_text(json.dumps(config))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d, t: (d / t / "tests" / "grading_config.json").unlink(), "grading_config.json: missing"),
        (
            lambda d, t: (d / t / "tests" / "grading_config.json").write_text('{"verifiers": []}'),
            "'verifiers' must be",
        ),
        (lambda d, t: _without_ids(d / t), "[metadata] needs task_id and world_id"),
        (
            lambda d, t: (d / t / "tests" / "grading_config.json").write_text(
                '{"verifiers": [{"verifier_id": "v"}]}'
            ),
            "verifiers[0] has no verifier_id or verifier_values.criteria",
        ),
        (lambda d, t: (d / t / "instruction.md").unlink(), "instruction.md: missing"),
    ],
)
def test_an_unmappable_part_is_named(v11_dir, damage, message):
    folder = "tasks/" + replica.task_dir_name(replica.tasks()[0])
    damage(v11_dir, folder)
    with pytest.raises(AtollError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_benchmark(v11_dir)


def test_a_missing_world_seed_is_named(v11_dir):
    (v11_dir / "worlds" / replica.LAW_WORLD / "filesystem.tar.gz").unlink()
    with pytest.raises(AtollError, match="filesystem.tar.gz missing"):
        load_benchmark(v11_dir)


def test_an_unsafe_seed_member_is_refused(v11_dir):
    seed = v11_dir / "worlds" / replica.LAW_WORLD / "filesystem.tar.gz"
    with tarfile.open(seed, "w:gz") as archive:
        info = tarfile.TarInfo("../escape.txt")
        archive.addfile(info)
    with pytest.raises(AtollError, match="member '../escape.txt' contains '..'"):
        load_benchmark(v11_dir)


def test_the_v11_layout_in_the_hugging_face_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATOLL_CACHE_DIR", str(tmp_path / "atoll-cache"))
    import hashlib
    import os

    repo = tmp_path / "hub" / "datasets--mercor--apex-agents-v1.1"
    snapshot = repo / "snapshots" / ("b" * 40)
    (repo / "blobs").mkdir(parents=True)
    for name, data in replica.v11_files().items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, link.parent), link)
    benchmark = load_benchmark(snapshot)
    assert benchmark.layout == "apex-v1.1" and len(benchmark.tasks) == 4
    assert Path(benchmark.world_seeds[replica.LAW_WORLD]["filesystem"]).parent.name == "blobs"


def _file_task_dir(root: Path) -> Path:
    task = next(t for t in replica.tasks() if t["task_id"] == replica.FILE_TASK)
    return root / "tasks" / replica.task_dir_name(task)


def test_gold_files_in_an_unknown_layout_are_an_error_naming_the_task(v11_dir):
    gold = v11_dir / "gold_files" / replica.FILE_TASK
    (gold / "filesystem").rename(gold / "files")  # not filesystem/…: never "0 gold files"
    with pytest.raises(AtollError, match=f"task '{replica.FILE_TASK}': gold files in a layout"):
        load_benchmark(v11_dir)


def test_a_declared_gold_folder_that_is_missing_is_an_error_naming_the_task(v11_dir):
    import shutil

    shutil.rmtree(v11_dir / "gold_files" / replica.FILE_TASK)
    with pytest.raises(AtollError, match=f"task '{replica.FILE_TASK}': golden_files_path"):
        load_benchmark(v11_dir)


def test_the_preamble_is_recognised_by_its_content_not_its_heading(v11_dir):
    instruction = _file_task_dir(v11_dir) / "instruction.md"
    text = instruction.read_text().replace("## Your working environment", "# Before you start")
    instruction.write_text(text)
    task = load_benchmark(v11_dir).task(replica.FILE_TASK)
    assert task.prompt == "Update the tariff tracker with the 25% rate for Canada."
    # A prompt that merely has a rule in it keeps everything.
    own = "Summarise the memo.\n\n---\n\nUse two paragraphs."
    instruction.write_text(own + "\n")
    assert load_benchmark(v11_dir).task(replica.FILE_TASK).prompt == own


def test_needs_snapshot_and_collect_steps_are_read_and_a_missing_collect_is_reported(v11_dir):
    task = load_benchmark(v11_dir).task(replica.FILE_TASK)
    assert task.model_extra["needs_snapshot"] is True
    assert task.model_extra["snapshot_collect"][0]["service"] == "world"
    text_task = load_benchmark(v11_dir).task(replica.TEXT_TASK)
    assert (text_task.model_extra["needs_snapshot"], text_task.model_extra["snapshot_collect"]) == (False, [])
    assert summarize(load_benchmark(v11_dir))["tasks_without_snapshot_collect"] == []
    toml = _file_task_dir(v11_dir) / "task.toml"
    toml.write_text(toml.read_text().split("\n[[verifier.collect]]")[0] + "\n")
    benchmark = load_benchmark(v11_dir)
    assert summarize(benchmark)["tasks_without_snapshot_collect"] == [replica.FILE_TASK]
    assert any(replica.FILE_TASK in w and "[[verifier.collect]]" in w for w in benchmark.warnings)
    result = CliRunner().invoke(app, ["bench", "load", str(v11_dir)])
    assert "no [[verifier.collect]] step" in " ".join(result.output.split())


def test_bench_load_json_lists_criteria_per_task(v11_dir):
    result = CliRunner().invoke(app, ["bench", "load", str(v11_dir), "--json"])
    assert result.exit_code == 0, result.output
    by_task = {entry["task_id"]: entry for entry in json.loads(result.output)["criteria_by_task"]}
    assert set(by_task) == {t["task_id"] for t in replica.tasks()}
    text = next(t for t in replica.tasks() if t["task_id"] == replica.TEXT_TASK)
    assert by_task[replica.TEXT_TASK]["criteria"] == text["rubric"]
    assert by_task[replica.TEXT_TASK]["world_id"] == replica.LAW_WORLD


def test_gold_files_shipped_in_tests_golden_are_read(v11_dir):
    import shutil

    tests = _file_task_dir(v11_dir) / "tests"
    shutil.move(v11_dir / "gold_files" / replica.FILE_TASK, tests / "golden")
    responses = json.loads((tests / "golden_responses.json").read_text())
    responses[0]["golden_files_path"] = None
    (tests / "golden_responses.json").write_text(json.dumps(responses))
    gold = load_benchmark(v11_dir).task(replica.FILE_TASK).gold_output
    assert [f.path for f in gold.files] == ["/Trackers/tariffs.xlsx"]
