"""`atoll regrade` and `atoll judge self-preference` over trials stored as a seed manifest and
a delta: read in place (the full archives are gone), graded as the archives were."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from atoll.testing.scripted_llm import ScriptedLLM
from atoll.world_store import seed_manifest_key
from orchestrator.regrade import regrade_run
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
from tests.atoll.world_factories import delta_bytes, store_seed
from tests.orchestrator.judge_only import judge_only_experiment

MET = {"content": json.dumps({"rationale": "the deliverable states it", "verdict": "met"})}


def _path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


@pytest.mark.slow
def test_regrade_reads_a_seed_manifest_and_a_delta_in_place(tmp_path: Path) -> None:
    spec = judge_only_experiment(tmp_path, "stored", {"model": None})
    asyncio.run(run_experiment(spec, quiet=True))
    store = TrialStore(spec.store)
    artifacts = tmp_path / "artifacts"
    (trial_spec, result, _state, _attempts), *_ = store.results("stored")
    assert result.outcome.value == "ungradeable" and result.snapshot_after_uri.endswith("after.tar.gz")

    # The same trial in the new layout: its seed stored by content, its after-state a delta.
    before, after = _path(result.snapshot_before_uri), _path(result.snapshot_after_uri)
    seed_uri, base = store_seed(artifacts, "seed", before.read_bytes())
    folder = after.parent
    delta_key = f"{folder.relative_to(artifacts).as_posix()}/after.delta.tar.gz"
    (artifacts / delta_key).write_bytes(
        delta_bytes(after.read_bytes(), base, delta_key=delta_key, base_key=seed_manifest_key("seed"))
    )
    before.unlink()
    after.unlink()  # nothing may read the full archives any more
    store.replace_result(
        "stored",
        trial_spec.trial_id,
        result.model_copy(
            update={"snapshot_before_uri": seed_uri, "snapshot_after_uri": (artifacts / delta_key).as_uri()}
        ),
        note="moved to world storage",
    )

    with ScriptedLLM(lambda request: MET) as judge:
        summary = asyncio.run(
            regrade_run(store, "stored", judge_model="openai/judge", api_base=judge.api_base)
        )
        prompts = " ".join(json.dumps(request["messages"]) for request in judge.requests)
    assert summary["trials_regraded"] == 1
    assert {r.outcome.value for _s, r, _st, _a in store.results("stored")} == {"pass"}
    # The judge was shown the agent's changes, read from the delta and the seed's blobs.
    changed = [c for c in json.loads(_grade(store).read_text())["changes"]["files"]]
    assert changed and all(Path(c["path"]).name in prompts for c in changed if c["change"] != "deleted")
    assert not list(tmp_path.glob("**/*.partial"))
    store.dispose()


def _grade(store: TrialStore) -> Path:
    (_spec, result, _state, _attempts), *_ = store.results("stored")
    return _path(result.grade_uri)
