"""The published APEX-Agents v1 layout loads unchanged: from a directory, from the Hugging
Face cache as it is (blob symlinks), and offline through ``hf://``."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from atoll.errors import AtollError
from atoll.loader import load_benchmark, summarize
from atoll_cli.cli import app
from tests.atoll import apex_replica as replica


@pytest.fixture()
def v1_dir(tmp_path: Path) -> Path:
    return replica.write_directory(tmp_path / "apex-agents")


@pytest.fixture()
def hf_cache(tmp_path: Path, monkeypatch) -> Path:
    cache = tmp_path / "hf-home" / "hub"
    monkeypatch.setenv("ATOLL_CACHE_DIR", str(tmp_path / "atoll-cache"))
    replica.write_hf_cache(cache)
    return cache


def test_every_published_field_is_kept(v1_dir):
    benchmark = load_benchmark(v1_dir)
    by_id = {task.task_id: task for task in benchmark.tasks}
    for record in replica.tasks():
        dumped = by_id[record["task_id"]].model_dump(mode="json", exclude_none=False)
        for key, value in record.items():
            if key != "rubric":
                assert dumped[key] == value, key
        assert [
            {"verifier_id": c["verifier_id"], "criteria": c["criteria"]} for c in dumped["rubric"]
        ] == record["rubric"]
    ib = benchmark.world(replica.IB_WORLD)
    assert ib.model_extra["apps"] == replica.worlds()[1]["apps"]
    assert ib.model_extra["world_description"].startswith("Pro forma")


def test_gold_responses_and_gold_files_become_gold_outputs(v1_dir):
    benchmark = load_benchmark(v1_dir)
    text = benchmark.task(replica.TEXT_TASK).gold_output
    assert text.answer == "The liability cap is $2,500,000 (Section 9.2)." and text.files == []
    files = benchmark.task(replica.FILE_TASK).gold_output
    assert files.answer is None  # the response is a snapshot id, not an answer
    assert files.model_extra["snapshot_id"] == "snap_0e1d2c3b4a5948372615f4e3d2c1b0a9"
    assert [gold.path for gold in files.files] == ["/Trackers/tariffs.xlsx"]
    assert (
        Path(files.files[0].model_extra["source"]).read_bytes()
        == replica.files()[f"gold_files/{replica.FILE_TASK}/filesystem/Trackers/tariffs.xlsx"]
    )
    summary = summarize(benchmark)
    assert summary["tasks_with_gold_output"] == 4
    assert (summary["gold_text_answers"], summary["gold_files"]) == (3, 1)


def test_grading_targets_are_derived_from_expected_output(v1_dir):
    benchmark = load_benchmark(v1_dir)

    def target(task_id):
        task = benchmark.task(task_id)
        return task.grading_target_for(task.rubric[0])

    assert target(replica.TEXT_TASK).kind == "final_answer"
    sheet = target(replica.FILE_TASK)
    assert sheet.kind == "file_type" and sheet.with_answer and "xlsx" in sheet.wanted_types()
    assert target(replica.NULL_OUTPUT_TASK).kind == "all"
    assert summarize(benchmark)["grading_targets"] == {
        "all (derived)": 1,
        "file_type (derived)": 1,
        "final_answer (derived)": 3,
    }


def test_a_file_gold_without_its_files_is_named(v1_dir):
    for path in sorted((v1_dir / "gold_files").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    with pytest.raises(AtollError, match=f"task '{replica.FILE_TASK}': gold_response_type is 'file'"):
        load_benchmark(v1_dir)


def test_apps_without_a_server_or_data_are_reported_with_their_tasks(v1_dir):
    summary = summarize(load_benchmark(v1_dir))
    apps = {entry["app"]: entry for entry in summary["unavailable_apps"]}
    assert set(apps) == {"Edgar SEC", "FMP"}
    assert apps["FMP"]["tasks"] == [replica.IB_TASK, replica.NULL_OUTPUT_TASK]
    assert "market_data" in apps["FMP"]["reason"]
    assert summary["tasks_needing_unavailable_apps"] == sorted([replica.IB_TASK, replica.NULL_OUTPUT_TASK])

    result = CliRunner().invoke(app, ["bench", "load", str(v1_dir)])
    assert result.exit_code == 0, result.output
    assert "unavailable app 'Edgar SEC'" in " ".join(result.output.split())
    assert replica.IB_TASK in result.output


def test_market_data_fixtures_make_edgar_and_fmp_available(v1_dir):
    archive = v1_dir / "world_files_zipped" / f"{replica.IB_WORLD}.zip"
    with zipfile.ZipFile(archive, "a") as opened:
        opened.writestr(".apps_data/market_data/quotes.csv", "symbol,date,close\nLUMN,2024-03-01,12.5\n")
    assert summarize(load_benchmark(v1_dir))["unavailable_apps"] == []


def test_an_app_atoll_does_not_serve_is_named(v1_dir):
    worlds = json.loads((v1_dir / "world_descriptions.json").read_text())
    worlds[0]["apps"].append(
        {"service_id": "svc_00000000000000000000000000000000", "service_name": "Bloomberg"}
    )
    (v1_dir / "world_descriptions.json").write_text(json.dumps(worlds))
    entry = next(e for e in summarize(load_benchmark(v1_dir))["unavailable_apps"] if e["app"] == "Bloomberg")
    assert entry["reason"] == "atoll has no server for this app"
    assert entry["tasks"] == [replica.TEXT_TASK, replica.FILE_TASK]


# --- the Hugging Face cache ------------------------------------------------------------------


def test_the_cache_snapshot_loads_through_its_blob_links(hf_cache):
    snapshot = next((hf_cache / "datasets--mercor--apex-agents" / "snapshots").iterdir())
    benchmark = load_benchmark(snapshot, verify_archives=True)
    assert len(benchmark.tasks) == 4
    assert Path(benchmark.world_archives[replica.LAW_WORLD]).parent.name == "blobs"
    overlay = Path(benchmark.task_overlays[replica.FILE_TASK])
    tracker = overlay / "filesystem" / "Trackers" / "tariffs.xlsx"
    assert tracker.is_file() and not tracker.is_symlink()
    assert not any(path.is_symlink() for path in overlay.rglob("*"))
    gold = benchmark.task(replica.FILE_TASK).gold_output.files[0]
    assert Path(gold.model_extra["source"]).parent.name == "blobs"


def test_hf_url_works_offline_on_a_filled_cache(hf_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(hf_cache))
    benchmark = load_benchmark("hf://mercor/apex-agents")
    assert {task.task_id for task in benchmark.tasks} == {t["task_id"] for t in replica.tasks()}
    assert summarize(benchmark)["tasks_with_input_files"] == 1


def _snapshot(hf_cache: Path) -> Path:
    return next((hf_cache / "datasets--mercor--apex-agents" / "snapshots").iterdir())


@pytest.mark.parametrize(
    "target",
    [
        "/etc/passwd",  # absolute
        "../../../../../../../../../../etc/passwd",  # out of the repository
        "../../../../blobs-elsewhere",  # inside the cache folder, not its blobs/
    ],
)
def test_a_cache_link_that_leaves_the_blobs_is_refused(hf_cache, target):
    snapshot = _snapshot(hf_cache)
    link = snapshot / "task_files" / replica.FILE_TASK / "filesystem" / "secret.txt"
    os.symlink(target, link)
    with pytest.raises(AtollError, match="secret.txt: symlink"):
        load_benchmark(snapshot)


def test_a_cache_link_to_another_link_in_the_snapshot_is_followed_only_to_a_blob(hf_cache):
    snapshot = _snapshot(hf_cache)
    # A link to a sibling link that itself goes to a blob is still the cache's own data...
    sibling = snapshot / "task_files" / replica.FILE_TASK / "filesystem" / "Trackers" / "tariffs.xlsx"
    hop = sibling.parent / "copy.xlsx"
    os.symlink("tariffs.xlsx", hop)
    overlay = Path(load_benchmark(snapshot).task_overlays[replica.FILE_TASK])
    assert (overlay / "filesystem" / "Trackers" / "copy.xlsx").read_bytes() == sibling.read_bytes()
    # ...but a link to a folder is not followed.
    os.symlink("/etc", sibling.parent / "etc")
    with pytest.raises(AtollError, match="etc: "):
        load_benchmark(snapshot)


def test_a_cache_tasks_file_linking_out_is_refused(hf_cache, tmp_path):
    snapshot = _snapshot(hf_cache)
    outside = tmp_path / "evil.json"
    outside.write_text("[]")
    (snapshot / "tasks_and_rubrics.json").unlink()
    os.symlink(outside, snapshot / "tasks_and_rubrics.json")
    with pytest.raises(AtollError, match="tasks_and_rubrics.json: symlink does not lead"):
        load_benchmark(snapshot)


def test_input_files_missing_from_a_partial_download_are_warned_about(v1_dir):
    import shutil

    shutil.rmtree(v1_dir / "task_files")
    summary = summarize(load_benchmark(v1_dir))
    assert summary["tasks_with_input_files"] == 0
    (warning,) = summary["warnings"]
    assert replica.FILE_TASK in warning and "task_files/" in warning
    result = CliRunner().invoke(app, ["bench", "load", str(v1_dir)])
    assert "will run without its input files" in " ".join(result.output.split())


def test_a_cache_link_out_is_refused_even_in_a_file_no_task_reads(hf_cache):
    # The cache is looked at once, as a whole: a link out anywhere in the snapshot is refused
    # before any file is read, so no later reader meets an unvetted link.
    snapshot = _snapshot(hf_cache)
    (snapshot / "notes").mkdir()
    os.symlink("/etc/passwd", snapshot / "notes" / "README.md")
    with pytest.raises(AtollError, match="README.md: symlink does not lead"):
        load_benchmark(snapshot)
