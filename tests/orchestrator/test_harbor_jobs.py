"""Reading a Harbor job folder is reading someone else's output (orchestrator/harbor_jobs.py):
links are refused wherever they are, files are read up to a size, and a trial that cannot be
read is recorded with its problem instead of failing the import. The viewer over a job folder:
tests/orchestrator/viewer/test_harbor_interop.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from atoll.errors import AtollError
from orchestrator import harbor_jobs
from orchestrator.harbor_jobs import import_harbor_jobs
from orchestrator.store import TrialStore

ATIF = {
    "schema_version": "ATIF-v1.6",
    "agent": {"name": "claude-code", "version": "1.0", "model_name": "anthropic/claude-opus-4"},
    "steps": [
        {"step_id": 1, "source": "user", "message": "Do it."},
        {"step_id": 2, "source": "agent", "message": "Done."},
    ],
}


def _trial(job: Path, name: str, reward: str = "1") -> Path:
    folder = job / name
    (folder / "agent").mkdir(parents=True)
    (folder / "verifier").mkdir()
    (folder / "agent" / "trajectory.json").write_text(json.dumps(ATIF))
    (folder / "verifier" / "reward.txt").write_text(reward)
    return folder


def _results(tmp_path: Path, folder: Path) -> dict[str, tuple[str, str | None]]:
    """task id -> (outcome, error) of each trial imported from ``folder``."""
    store = TrialStore(str(tmp_path / "atoll.db"))
    try:
        (name,) = import_harbor_jobs(folder, store, grades=tmp_path / "grades")
        return {
            spec.task_id: (result.outcome.value, result.error) for spec, result, _s, _a in store.results(name)
        }
    finally:
        store.dispose()


def test_links_are_refused_wherever_they_are_and_big_files_are_not_read(tmp_path, monkeypatch):
    job = tmp_path / "job"
    _trial(job, "plain__1")
    outside = tmp_path / "outside"
    (outside / "agent").mkdir(parents=True)
    (outside / "agent" / "trajectory.json").write_text(json.dumps(ATIF))
    linked_folder = _trial(job, "linked-agent__2")
    (linked_folder / "agent" / "trajectory.json").unlink()
    (linked_folder / "agent").rmdir()
    (linked_folder / "agent").symlink_to(outside / "agent")  # a link on the way, not the file itself
    linked_reward = _trial(job, "linked-reward__3")
    (linked_reward / "verifier" / "reward.txt").unlink()
    (tmp_path / "one.txt").write_text("1")
    (linked_reward / "verifier" / "reward.txt").symlink_to(tmp_path / "one.txt")
    (job / "linked-trial__4").symlink_to(outside)  # a trial folder that is a link: not a trial
    _trial(job, "big__5", reward="1" + " " * 64)
    monkeypatch.setattr(harbor_jobs, "MAX_SMALL_BYTES", 32)
    results = _results(tmp_path, job)
    assert results["plain"] == ("pass", None)
    assert (
        results["linked-agent"][0] == "pass" and "agent/trajectory.json: a link" in results["linked-agent"][1]
    )
    assert (
        results["linked-reward"][0] == "infra_error" and "reward.txt: a link" in results["linked-reward"][1]
    )
    assert "linked-trial" not in results
    assert results["big"][0] == "infra_error" and "larger than 32 bytes" in results["big"][1]


@pytest.mark.parametrize(
    ("reward_file", "content", "outcome", "problem"),
    [
        ("reward.json", {"reward": 0.25, "c1": 1}, "fail", None),
        ("reward.json", {"only": 1}, "pass", None),
        ("reward.json", {"c1": 1, "c2": 0}, "infra_error", "no overall reward"),
        ("reward.txt", "nan", "infra_error", "not a finite number"),
        ("reward.txt", "{broken", "infra_error", "no overall reward"),
    ],
)
def test_the_reward_decides_the_outcome_and_a_missing_one_is_an_infrastructure_error(
    tmp_path, reward_file, content, outcome, problem
):
    folder = _trial(tmp_path / "job", "task__1")
    (folder / "verifier" / "reward.txt").unlink()
    (folder / "verifier" / reward_file).write_text(
        content if isinstance(content, str) else json.dumps(content)
    )
    result_outcome, error = _results(tmp_path, tmp_path / "job")["task"]
    assert result_outcome == outcome
    assert (problem is None and error is None) or problem in error


def test_verdicts_of_an_unexpected_shape_are_named_and_the_reward_still_counts(tmp_path):
    folder = _trial(tmp_path / "job", "task__1", reward="1")
    (folder / "verifier" / "grade_details.json").write_text(json.dumps({"verifier_results": [{"score": 1}]}))
    outcome, error = _results(tmp_path, tmp_path / "job")["task"]
    assert outcome == "pass" and "grade_details.json: no verifier_results list" in error


def test_a_folder_without_harbor_trials_is_refused_naming_it(tmp_path):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    store = TrialStore(str(tmp_path / "atoll.db"))
    try:
        with pytest.raises(AtollError) as caught:
            import_harbor_jobs(tmp_path / "empty", store)
    finally:
        store.dispose()
    assert str(tmp_path / "empty") in caught.value.message and "no Harbor job" in caught.value.message


def test_the_viewer_never_reads_the_job_folder_again_after_the_import(tmp_path):
    """What was checked at the import is what the viewer shows: the trajectory it points at is
    its own copy, so a file replaced afterwards (by a link to a secret, say) is never read."""
    from urllib.parse import unquote, urlparse

    job = tmp_path / "job"
    folder = _trial(job, "task-a__1")
    store = TrialStore(str(tmp_path / "atoll.db"))
    try:
        (name,) = import_harbor_jobs(job, store, grades=tmp_path / "scratch")
        ((_spec, result, _s, _a),) = list(store.results(name))
    finally:
        store.dispose()
    secret = tmp_path / "secret.txt"
    secret.write_text("the operator's key")
    (folder / "agent" / "trajectory.json").unlink()
    (folder / "agent" / "trajectory.json").symlink_to(secret)
    shown = Path(unquote(urlparse(result.trajectory_uri).path))
    assert shown.parent == (tmp_path / "scratch").resolve()
    assert "Done." in shown.read_text() and "operator" not in shown.read_text()


def test_a_file_swapped_for_a_link_is_refused_by_the_open_itself(tmp_path, monkeypatch):
    """The check and the read are one open (O_NOFOLLOW on each part, from the trial folder's
    descriptor): a link swapped in after any path check is refused, not followed."""
    folder = _trial(tmp_path / "job", "task-b__1")
    secret = tmp_path / "secret.txt"
    secret.write_text("1")
    (folder / "verifier" / "reward.txt").unlink()
    (folder / "verifier" / "reward.txt").symlink_to(secret)
    monkeypatch.setattr(Path, "is_symlink", lambda self: False)  # as if checked before the swap
    with pytest.raises(AtollError, match=r"reward\.txt: a link \(not followed\)"):
        harbor_jobs._read_inside(folder, ("verifier", "reward.txt"), 1024)
