"""A run stores each trial's worlds as a seed manifest (by content, once) and a delta, and
`atoll regrade` reads them in place: no full archive is written or needed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from atoll.testing.scripted_llm import ScriptedLLM
from orchestrator.regrade import regrade_run
from orchestrator.runner import run_experiment
from orchestrator.store import TrialStore
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
    assert result.outcome.value == "ungradeable"
    assert result.snapshot_before_uri.endswith(".manifest.json") and "/seeds/" in result.snapshot_before_uri
    assert result.snapshot_after_uri.endswith("/after.delta.tar.gz")
    assert (artifacts / "blobs" / "sha256").is_dir()
    assert not [path for path in artifacts.rglob("*.tar.gz") if not path.name.endswith(".delta.tar.gz")]

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
