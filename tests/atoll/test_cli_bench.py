import json
import subprocess
import sys

from tests.atoll.factories import make_task, write_benchmark


def _atoll(*args):
    return subprocess.run(
        [sys.executable, "-m", "atoll_cli", *args], capture_output=True, text=True, timeout=300
    )


def test_bench_sample_then_load_summarises_it(tmp_path):
    generated = _atoll("bench", "sample", str(tmp_path / "sample"))
    assert generated.returncode == 0, generated.stderr
    loaded = _atoll("bench", "load", str(tmp_path / "sample"), "--json")
    assert loaded.returncode == 0, loaded.stderr
    summary = json.loads(loaded.stdout)
    assert summary["tasks"] >= 12 and len(summary["worlds"]) >= 2
    assert set(summary["expected_outputs"]) == {
        "message_in_console",
        "make_new_doc",
        "make_new_sheet",
        "make_new_slide_deck",
        "edit_existing_sheet",
        "edit_existing_doc",
        "edit_existing_slide_deck",
    }
    assert len(summary["tasks_per_domain"]) == 3
    assert all(world["files"] >= 25 and world["app_data_files"] >= 3 for world in summary["worlds"])
    assert 1 <= summary["criteria_per_task"]["min"] <= summary["criteria_per_task"]["max"] <= 6
    table = _atoll("bench", "load", str(tmp_path / "sample"))
    assert "tasks per domain" in table.stdout and "criteria per task: mean" in table.stdout


def test_bench_load_any_apex_directory_and_errors_are_one_line(tmp_path):
    root = write_benchmark(
        tmp_path / "b", tasks=[make_task("a"), make_task("b", domain="Investment Banking")]
    )
    summary = json.loads(_atoll("bench", "load", str(root), "--json").stdout)
    assert summary["tasks_per_domain"] == {"Investment Banking": 1, "Law": 1}
    broken = write_benchmark(tmp_path / "broken", tasks=[make_task(world_id="nowhere")])
    result = _atoll("bench", "load", str(broken))
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "points at unknown world 'nowhere'" in result.stderr and "Traceback" not in result.stderr
