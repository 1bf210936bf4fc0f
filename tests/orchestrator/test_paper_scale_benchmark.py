"""benchmarks/paper_world.py and benchmarks/paper_scale.py keep working (issue 30), at a tiny
size: two padded worlds, two tasks. No timing or target is asserted here."""

from __future__ import annotations

import json
import zipfile

import pytest

from atoll.loader import load_benchmark as load_atoll_benchmark
from tests.benchmark_scripts import load_benchmark

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    """A two-world, two-task paper benchmark, generated the way paper_scale.py keeps one."""
    scale = load_benchmark("paper_scale")
    where = tmp_path_factory.mktemp("paper") / "bench"
    return scale._ready_benchmark(where, worlds=2, tasks=2, seed=0)


def test_worlds_are_padded_to_the_paper_size_and_tasks_pass_by_checks(paper):
    zips = sorted((paper / "world_files_zipped").glob("*.zip"))
    assert [path.stem for path in zips] == ["world_atlas_mna_01", "world_keystone_consulting_00"]
    for path in zips:
        with zipfile.ZipFile(path) as archive:
            members = [info for info in archive.infolist() if not info.is_dir()]
        assert len(members) == 156
        assert 7.9e6 <= sum(info.file_size for info in members) <= 8.1e6
        assert 1.2e6 <= path.stat().st_size <= 1.7e6, path.stat().st_size
    benchmark = load_atoll_benchmark(paper)
    tasks = benchmark.tasks
    assert [task.task_id for task in tasks] == [
        "p000-keystone-01-packaging-baseline",
        "p001-atlas-01-comps-implied-ev",
    ]
    assert [task.world_id for task in tasks] == ["world_keystone_consulting_00", "world_atlas_mna_01"]
    assert all(criterion.check is not None for task in tasks for criterion in task.rubric)


def test_generation_is_deterministic_and_leaves_other_files_alone(paper, tmp_path):
    world = load_benchmark("paper_world")
    (tmp_path / "again" / "world_files_zipped").mkdir(parents=True)
    (tmp_path / "again" / "world_files_zipped" / "stale.zip").write_bytes(b"old")
    (tmp_path / "again" / "notes.txt").write_text("mine")
    again = world.generate_paper_benchmark(tmp_path / "again", worlds=2, tasks=2, seed=0)
    assert (again / "notes.txt").read_text() == "mine"
    assert not (again / "world_files_zipped" / "stale.zip").exists()
    for name in ("world_keystone_consulting_00.zip", "world_atlas_mna_01.zip"):
        assert (again / "world_files_zipped" / name).read_bytes() == (
            paper / "world_files_zipped" / name
        ).read_bytes()
    assert (again / "tasks_and_rubrics.json").read_bytes() == (paper / "tasks_and_rubrics.json").read_bytes()


def test_paper_scale_runs_and_reports_against_the_targets(paper, tmp_path, capsys):
    scale = load_benchmark("paper_scale")
    out = tmp_path / "paper.json"
    code = scale.main(["--tasks", "2", "--worlds", "2", "--benchmark", str(paper), "--json", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "generated in" not in printed  # the fixture's benchmark was reused
    assert "target CPU per trial <= 0.4 s:" in printed and "of a world archive:" in printed
    assert "at 30,720 trials:" in printed and "Mbit/s" in printed
    result = json.loads(out.read_text())
    (run,) = result["runs"]
    assert run["trials"] == run["passed"] == 2
    assert run["cpu_s_per_trial"] > 0 and run["peak_rss_bytes"] > 0
    # A trial stores its final state as a delta on its seed; the worlds are stored once, by content.
    names = run["artifact_bytes_by_name"]
    assert names["after.delta.tar.gz"] > 0 and names["blobs/"] > 0 and names["seeds/"] > 0
    assert "after.tar.gz" not in names
    assert run["world_bytes"] == names["blobs/"] + names["seeds/"]
    per_trial = run["trial_bytes_per_trial"] + run["world_bytes"] / 30_720
    assert result["artifact_share_of_world_archive"][0] == pytest.approx(
        per_trial / result["world_archive_bytes"]
    )
    assert result["this_run_share_of_world_archive"][0] == pytest.approx(
        run["artifact_bytes_per_trial"] / result["world_archive_bytes"]
    )
    assert set(result["targets"]) == {"cpu_s_per_trial", "artifact_share_of_world_archive"}
    assert result["paper"]["gigabytes"][0] == pytest.approx(per_trial * 30_720 / 1e9)
