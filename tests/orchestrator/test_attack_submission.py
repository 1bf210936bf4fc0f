"""Hostile submitters against the orchestrator API (issue #26): what a ``POST /runs`` body can
make the service read, tell or write beyond what the operator allows."""

from __future__ import annotations

import pytest
import yaml
from fastapi.testclient import TestClient

from orchestrator.api import ApiSettings, create_app
from tests.atoll.factories import make_task, world_zip_bytes, write_benchmark

_UP = "../" * 12


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """An offline Hugging Face cache holding one dataset (any dataset the service once loaded)."""
    repo = tmp_path / "hub" / "datasets--org--bench"
    commit = "a" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    write_benchmark(repo / "snapshots" / commit, tasks=[make_task("t0")])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    return repo


@pytest.fixture
def client(tmp_path):
    settings = ApiSettings(
        store=f"sqlite:///{tmp_path / 'api.db'}",
        output_dir=str(tmp_path / "out"),
        artifacts=(tmp_path / "artifacts").as_uri(),
        benchmark_roots=str(tmp_path / "roots"),
    )
    with TestClient(create_app(settings)) as client:
        yield client


def _post(client, benchmark: str, name: str = "probe"):
    body = {
        "name": name,
        "benchmark": benchmark,
        "executor": "instant",
        "agents": [{"name": "a", "agent": "replay", "model": "replay"}],
    }
    return client.post("/runs", content=yaml.safe_dump(body))


@pytest.mark.parametrize("form", ["{up}{path}", "{path}", "{path}/"])
def test_an_hf_revision_is_no_oracle_for_host_folders(client, hf_cache, tmp_path, form):
    """huggingface_hub joins the revision to ``<cache>/datasets--ORG--NAME/refs/`` and reads that
    file offline: ``@../../etc`` (or ``@/etc``) answered "Is a directory" for a host folder and
    "not in the cache" for a missing one, past the benchmark roots' one answer for both."""
    (tmp_path / "host-folder").mkdir()
    answers = []
    for target in (tmp_path / "host-folder", tmp_path / "no-such-folder"):
        revision = form.format(up=_UP, path=str(target).lstrip("/") if form.startswith("{up}") else target)
        answer = _post(client, f"hf://org/bench@{revision}")
        assert answer.status_code == 400
        answers.append(answer.json()["error"]["message"].replace(str(target), "PATH"))
    assert answers[0] == answers[1]
    assert "Is a directory" not in answers[0] and "revision" in answers[0]
    assert client.get("/runs").json()["runs"] == []


def test_an_hf_revision_cannot_load_a_benchmark_outside_the_roots(client, hf_cache, tmp_path):
    """Offline, the file the revision names is read as the commit, and the commit is joined to
    ``snapshots/``: a file holding an absolute path made the service load that folder."""
    write_benchmark(tmp_path / "outside", tasks=[make_task("secret-task")])
    pointer = tmp_path / "pointer"
    pointer.write_text(str(tmp_path / "outside"))
    answer = _post(client, f"hf://org/bench@{_UP}{str(pointer).lstrip('/')}")
    assert answer.status_code == 400, answer.text
    assert client.get("/runs").json()["runs"] == []


def test_a_plain_hf_revision_still_loads(client, hf_cache):
    for index, revision in enumerate(("", "@main", "@" + "a" * 40)):
        answer = _post(client, f"hf://org/bench{revision}", name=f"run-{index}")
        assert answer.status_code == 202, answer.text
        assert answer.json()["planned"] == 1


@pytest.mark.parametrize("climbing", ["world_id", "task_id"])
def test_a_published_dataset_cannot_make_a_world_of_host_files(client, tmp_path, monkeypatch, climbing):
    """``hf://`` takes any dataset anyone published. Its ids name files and folders:
    ``world_files_zipped/<world_id>.zip`` and ``task_files/<task_id>/`` (the overlay copied into
    the world). Ids that climb made a host archive the world, or a host folder the overlay,
    that the submitter's agent then read."""
    host = tmp_path / "host"
    (host / "secrets").mkdir(parents=True)
    (host / "secrets" / "id_rsa").write_text("PRIVATE KEY")
    (host / "loot.zip").write_bytes(world_zip_bytes({"filesystem/stolen.txt": b"HOST"}))
    climb = "../" * 20
    world_id = f"{climb}{str(host / 'loot').lstrip('/')}" if climbing == "world_id" else "world-a"
    task_id = f"{climb}{str(host / 'secrets').lstrip('/')}" if climbing == "task_id" else "t0"
    commit = "b" * 40
    repo = tmp_path / "hub" / "datasets--someone--published"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    zips = {} if climbing == "world_id" else {"world-a": world_zip_bytes()}
    task = make_task(task_id, world_id=world_id, task_input_files="notes")
    write_benchmark(snapshot, tasks=[task], worlds=[{"world_id": world_id}], zips=zips)
    (snapshot / "task_files").mkdir()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    answer = _post(client, "hf://someone/published")
    assert answer.status_code == 400, answer.text
    assert f"{climbing}: Value error" in answer.json()["error"]["message"]
    assert "must be one file name" in answer.json()["error"]["message"]
    assert client.get("/runs").json()["runs"] == []


def test_judge_samples_are_bounded_when_the_experiment_is_accepted(client, tmp_path):
    """``judge.samples: 1000`` was accepted (202) and then failed every trial on the workers,
    whose judge takes at most 15; it is refused naming the field now."""
    write_benchmark(tmp_path / "roots" / "bench", tasks=[make_task("t0")])
    body = {
        "name": "samples",
        "benchmark": str(tmp_path / "roots" / "bench"),
        "executor": "instant",
        "agents": [{"name": "a", "agent": "replay", "model": "replay"}],
        "judge": {"model": "openai/gpt-4o", "samples": 1000},
    }
    answer = client.post("/runs", content=yaml.safe_dump(body))
    assert answer.status_code == 400, answer.text
    assert "judge.samples" in answer.json()["error"]["message"]
    assert client.get("/runs").json()["runs"] == []


def test_a_small_body_cannot_write_a_large_store(tmp_path):
    """Each trial the store keeps carries its agent's configuration: 0.5 MiB of system prompt
    in a 1 MiB body with 200 runs wrote 100 MB, and 100,000 trials (ATOLL_MAX_TRIALS) would
    write 50 GB. What a plan would store is bounded (ATOLL_MAX_PLAN_BYTES; 10 MiB here)."""
    write_benchmark(tmp_path / "roots" / "bench", tasks=[make_task("t0")])
    database = tmp_path / "api.db"
    settings = ApiSettings(
        store=f"sqlite:///{database}",
        output_dir=str(tmp_path / "out"),
        artifacts=(tmp_path / "artifacts").as_uri(),
        benchmark_roots=str(tmp_path / "roots"),
        max_plan_bytes=10 * 1024**2,
    )
    body = {
        "name": "amplified",
        "benchmark": str(tmp_path / "roots" / "bench"),
        "executor": "instant",
        "runs": 100,
        "agents": [
            {"name": "a", "agent": "replay", "model": "replay", "config": {"system_prompt": "x" * 200_000}}
        ],
    }
    with TestClient(create_app(settings)) as client:
        answer = client.post("/runs", content=yaml.safe_dump(body, width=10**9))
        assert answer.status_code == 400, answer.text[:300]
        assert answer.json()["error"]["code"] == "too_many_trials"
        assert "agent configuration" in answer.json()["error"]["message"]
        assert client.get("/runs").json()["runs"] == []
    assert not database.exists() or database.stat().st_size < 1024**2


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("!!set {a: null}", "a YAML set"),
        ("!!binary aGk=", "a YAML bytes"),
        ("2001-12-14", "a YAML date"),
        ("2001-12-14T21:59:43Z", "a YAML datetime"),
        (".nan", "nan is not a JSON number"),
        ("{1: a}", "key 1 is a YAML int"),
    ],
)
def test_yaml_values_json_cannot_hold_are_a_bad_request(tmp_path, value, named):
    """YAML types JSON has no form for were accepted and failed later (a 500 while storing or
    fingerprinting the experiment); NaN was stored, which PostgreSQL's JSON refuses."""
    write_benchmark(tmp_path / "roots" / "bench", tasks=[make_task("t0")])
    settings = ApiSettings(
        store=f"sqlite:///{tmp_path / 'api.db'}",
        output_dir=str(tmp_path / "out"),
        artifacts=(tmp_path / "artifacts").as_uri(),
        benchmark_roots=str(tmp_path / "roots"),
    )
    body = (
        f"name: typed\nbenchmark: {tmp_path / 'roots' / 'bench'}\nexecutor: instant\n"
        f"agents:\n  - name: a\n    agent: replay\n    model: replay\n    config: {{system_prompt_suffix: {value}}}\n"
    )
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        answer = client.post("/runs", content=body)
        assert answer.status_code == 400, answer.text[:300]
        assert answer.json()["error"]["message"].startswith(
            "request body: agents[0].config.system_prompt_suffix"
        )
        assert named in answer.json()["error"]["message"]
        assert client.get("/runs").json()["runs"] == []
