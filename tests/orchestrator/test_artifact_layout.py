"""Artifact folders people can read: <experiment>/<task>/<agent>/run-<n>/attempt-<k>/, safe
segments, one folder per trial, and runs recorded in the old hash-named layout still read."""

import json
from pathlib import Path

import pytest

from atoll.errors import AtollError
from atoll.trial import Outcome, TrialResult, TrialSpec
from orchestrator.artifacts import ArtifactStore, claim_trial_folder, path_segment, trial_prefix
from orchestrator.regrade import _trial_folder


def _spec(**overrides) -> TrialSpec:
    fields = {
        "experiment": "exp",
        "task_id": "find-revenue",
        "world_id": "w",
        "world_digest": "d",
        "agent_name": "alpha",
        "agent": "react",
        "model": "openai/m",
        "run_index": 2,
        "agent_config": {"max_steps": 5, "api_key": "sk-secret"},
    }
    fields.update(overrides)
    return TrialSpec(**fields)


def test_plain_names_make_the_folder_as_they_are():
    assert trial_prefix(_spec(), 1) == "exp/find-revenue/alpha/run-2/attempt-1"


@pytest.mark.parametrize("name", ["..", ".", "../../etc", "a/b", "/abs", "a\\b", "", "-x", ".hidden", "ä ö"])
def test_every_segment_is_one_safe_path_component(name):
    segment = path_segment(name)
    assert segment and "/" not in segment and "\\" not in segment
    assert segment not in (".", "..") and not segment.startswith((".", "-"))
    assert all(c.isascii() and (c.isalnum() or c in "._-") for c in segment)


def test_names_that_clean_up_alike_get_different_folders():
    names = ["a/b", "a b", "a_b", "a:b", "a__b"]
    assert len({path_segment(name) for name in names}) == len(names)
    assert path_segment("a_b") == "a_b"  # a name that needed no change keeps it exactly
    assert path_segment("a/b").startswith("a_b-")


def test_a_traversing_task_id_stays_inside_the_experiment_folder(tmp_path):
    store = ArtifactStore(str(tmp_path / "artifacts"))
    prefix = claim_trial_folder(store, _spec(task_id="../../outside", agent_name=".."), 1)
    written = (tmp_path / "artifacts" / prefix / "trial.json").resolve()
    assert written.is_relative_to((tmp_path / "artifacts" / "exp").resolve())
    assert not (tmp_path / "outside").exists()


def test_the_folder_names_its_trial_without_secrets_and_is_claimed_once(tmp_path):
    store = ArtifactStore(str(tmp_path / "artifacts"))
    spec = _spec()
    prefix = claim_trial_folder(store, spec, 1)
    assert prefix == "exp/find-revenue/alpha/run-2/attempt-1"
    record = json.loads((tmp_path / "artifacts" / prefix / "trial.json").read_text())
    assert (
        record["trial_id"],
        record["task_id"],
        record["agent"],
        record["run_index"],
        record["attempt"],
    ) == (spec.trial_id, "find-revenue", "alpha", 2, 1)
    assert "sk-secret" not in json.dumps(record) and record["spec"]["agent_config"] == {"max_steps": 5}
    assert claim_trial_folder(store, spec, 1) == prefix  # the executor and its pod agree
    assert claim_trial_folder(store, spec, 2) == "exp/find-revenue/alpha/run-2/attempt-2"


def test_another_configuration_of_the_same_names_never_overwrites_the_first(tmp_path):
    """`atoll run --replace` archives the old trials; their artifacts must stay theirs."""
    store = ArtifactStore(str(tmp_path / "artifacts"))
    old, new = _spec(), _spec(agent_config={"max_steps": 50})
    assert old.trial_id != new.trial_id
    first = claim_trial_folder(store, old, 1)
    second = claim_trial_folder(store, new, 1)
    assert second == f"{first}-{new.trial_id[:12]}"
    assert json.loads((tmp_path / "artifacts" / first / "trial.json").read_text())["trial_id"] == old.trial_id
    assert (
        json.loads((tmp_path / "artifacts" / second / "trial.json").read_text())["trial_id"] == new.trial_id
    )
    assert claim_trial_folder(store, new, 1) == second


def test_regrade_writes_beside_the_recorded_artifacts_in_either_layout(tmp_path):
    store = ArtifactStore(str(tmp_path / "artifacts"))
    spec = _spec()
    old_layout = store.uri(f"exp/{spec.trial_id}/attempt-1/trajectory.json")
    result = TrialResult(trial_id=spec.trial_id, outcome=Outcome.passed, trajectory_uri=old_layout)
    assert _trial_folder(store, spec, result) == f"exp/{spec.trial_id}/attempt-1"
    new_layout = result.model_copy(
        update={"trajectory_uri": store.uri(f"{trial_prefix(spec, 1)}/trajectory.json")}
    )
    assert _trial_folder(store, spec, new_layout) == trial_prefix(spec, 1)
    elsewhere = result.model_copy(update={"trajectory_uri": Path("/somewhere/else/trajectory.json").as_uri()})
    assert _trial_folder(store, spec, elsewhere) == trial_prefix(spec, 1)


def test_a_trial_record_that_cannot_be_read_is_an_error_not_another_trials_folder(tmp_path):
    # Taken for "held by another trial", a passing read error would send this trial to the
    # -<id> fallback folder while its Kubernetes pod (asking again) might pick the first one.
    store = ArtifactStore(str(tmp_path / "artifacts"))
    spec = _spec()
    record = tmp_path / "artifacts" / trial_prefix(spec, 1) / "trial.json"
    record.mkdir(parents=True)  # exists, but reading it fails (OSError)
    with pytest.raises(OSError):
        claim_trial_folder(store, spec, 1)
    record.rmdir()
    record.write_text("{not json")
    with pytest.raises(AtollError, match=r"trial\.json is not a trial record"):
        claim_trial_folder(store, spec, 1)
    assert sorted(path.name for path in record.parent.parent.iterdir()) == ["attempt-1"]  # no fallback
