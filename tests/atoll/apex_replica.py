"""A small replica of the published APEX-Agents v1 dataset (``mercor/apex-agents``), field
for field, and of the Hugging Face cache that ``hf download`` leaves.

Schema as published: tasks carry ``task_id`` (``task_<hex>``), ``task_name``, ``domain``,
``world_id``, ``prompt``, ``task_input_files`` (``snap_<hex>`` or null), ``expected_output``
(one of seven values or null), ``gold_response`` (text, or ``snap_<hex>`` when
``gold_response_type`` is ``"file"``) and ``rubric`` items of only ``verifier_id``
(``ver_<hex>``) and ``criteria``; worlds are ``{world_id, world_name, world_description,
domain, apps: [{service_id, service_name}]}``, the investment-banking one listing Edgar SEC
and FMP besides the nine standard apps.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

NINE_APPS = [
    ("svc_a3ac7e47956c43048235dbd25d8c849d", "Calendar"),
    ("svc_eec407c6dffc45579b7a4025f8439fe2", "Chat"),
    ("svc_bd6a6280b337424cb5e6e4959301520f", "Code Execution"),
    ("svc_2293fbde36334312996ecfeaca4e978b", "Excel"),
    ("svc_aba5e37188c745fba2bbd575545a9743", "Filesystem"),
    ("svc_56aff339e48c4f0aaa111988ca7c0b12", "Mail"),
    ("svc_bd0089edc9eb45df9b459b7b9d47f44f", "PDFs"),
    ("svc_8361cf10b2f84ed78225902d0a6a4255", "Powerpoint"),
    ("svc_5d56252d4260473284737585ad91eeb3", "Word"),
]
MARKET_APPS = [
    ("svc_f5802ff259f6474b8f27bd11cd42e4fe", "Edgar SEC"),
    ("svc_0f1a736de09143968916bf5816b9b36c", "FMP"),
]

LAW_WORLD = "world_9797d81fa71c4dbfb192e89a0f2ac811"
IB_WORLD = "world_5970ed13783a463181bdf38337f0cad1"
TEXT_TASK = "task_0a1b2c3d4e5f40718293a4b5c6d7e8f9"
FILE_TASK = "task_1b2c3d4e5f6a40718293a4b5c6d7e8f0"
IB_TASK = "task_2c3d4e5f6a7b40718293a4b5c6d7e8f1"
NULL_OUTPUT_TASK = "task_3d4e5f6a7b8c40718293a4b5c6d7e8f2"


def _apps(pairs: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"service_id": sid, "service_name": name} for sid, name in pairs]


def worlds() -> list[dict[str, Any]]:
    return [
        {
            "world_id": LAW_WORLD,
            "world_name": "Law World 416",
            "world_description": "Advise the board on tariff exposure in supply contracts.",
            "domain": "Law",
            "apps": _apps(NINE_APPS),
        },
        {
            "world_id": IB_WORLD,
            "world_name": "Investment Banking World 246",
            "world_description": "Pro forma valuation ahead of a potential acquisition.",
            "domain": "Investment Banking",
            "apps": _apps(sorted(NINE_APPS + MARKET_APPS, key=lambda pair: pair[1])),
        },
    ]


def tasks() -> list[dict[str, Any]]:
    return [
        {
            "task_id": TEXT_TASK,
            "task_name": "World416_Task02",
            "domain": "Law",
            "world_id": LAW_WORLD,
            "prompt": "What is the liability cap in the supply agreement? Reply here.",
            "task_input_files": None,
            "expected_output": "message_in_console",
            "gold_response": "The liability cap is $2,500,000 (Section 9.2).",
            "gold_response_type": "text",
            "rubric": [
                {
                    "verifier_id": "ver_5b1d0c3e9a7f4e2b8c6d1a0f3e5b7c9d",
                    "criteria": "States the cap is $2,500,000",
                },
                {"verifier_id": "ver_6c2e1d4f0b8a4f3c9d7e2b1a4f6c8d0e", "criteria": "Cites Section 9.2"},
            ],
        },
        {
            "task_id": FILE_TASK,
            "task_name": "World416_Task07",
            "domain": "Law",
            "world_id": LAW_WORLD,
            "prompt": "Update the tariff tracker with the 25% rate for Canada.",
            "task_input_files": "snap_9f8e7d6c5b4a49382716a5b4c3d2e1f0",
            "expected_output": "edit_existing_sheet",
            "gold_response": "snap_0e1d2c3b4a5948372615f4e3d2c1b0a9",
            "gold_response_type": "file",
            "rubric": [
                {
                    "verifier_id": "ver_7d3f2e5a1c9b4a4d0e8f3c2b5a7d9e1f",
                    "criteria": "Canada's rate reads 25%",
                },
            ],
        },
        {
            "task_id": IB_TASK,
            "task_name": "World246_Task01",
            "domain": "Investment Banking",
            "world_id": IB_WORLD,
            "prompt": "Using the latest filing, what is the target's trailing revenue?",
            "task_input_files": None,
            "expected_output": "message_in_console",
            "gold_response": "Trailing twelve-month revenue is $412.0m.",
            "gold_response_type": "text",
            "rubric": [
                {
                    "verifier_id": "ver_8e4a3f6b2d0c4b5e1f9a4d3c6b8e0f2a",
                    "criteria": "States revenue of $412.0m",
                },
            ],
        },
        {
            "task_id": NULL_OUTPUT_TASK,
            "task_name": "World246_Task04",
            "domain": "Investment Banking",
            "world_id": IB_WORLD,
            "prompt": "Draft the teaser.",
            "task_input_files": None,
            "expected_output": None,
            "gold_response": "A one-page teaser.",
            "gold_response_type": "text",
            "rubric": [{"verifier_id": "ver_9f5b4a7c3e1d4c6f2a0b5e4d7c9f1a3b", "criteria": "Is one page"}],
        },
    ]


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@functools.cache
def _files() -> tuple[tuple[str, bytes], ...]:
    return tuple(_build_files().items())


def files() -> dict[str, bytes]:
    """Every file of the dataset by its path in the repository (the same bytes every call)."""
    return dict(_files())


def _build_files() -> dict[str, bytes]:
    from tests.grader.factories import xlsx

    tracker = xlsx({"Rates": [["Country", "Rate"], ["Canada", "10%"]]})
    updated = xlsx({"Rates": [["Country", "Rate"], ["Canada", "25%"]]})
    return {
        "tasks_and_rubrics.json": json.dumps(tasks(), indent=2).encode(),
        "world_descriptions.json": json.dumps(worlds(), indent=2).encode(),
        "metadata.json": json.dumps({"counts": {"tasks": 4, "worlds": 2}}).encode(),
        f"world_files_zipped/{LAW_WORLD}.zip": _zip(
            {
                "filesystem/Contracts/supply_agreement.txt": b"9.2 Liability cap: $2,500,000.",
                ".apps_data/mail/inbox.mbox": b"",
            }
        ),
        f"world_files_zipped/{IB_WORLD}.zip": _zip({"filesystem/Deal/teaser_notes.txt": b"notes"}),
        f"task_files/{FILE_TASK}/filesystem/Trackers/tariffs.xlsx": tracker,
        f"gold_files/{FILE_TASK}/filesystem/Trackers/tariffs.xlsx": updated,
    }


def write_directory(root: Path) -> Path:
    """The dataset as ``hf download --local-dir`` leaves it: plain files."""
    for name, data in files().items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def write_hf_cache(cache: Path, repo_id: str = "mercor/apex-agents", revision: str = "a" * 40) -> Path:
    """The dataset as the Hugging Face cache keeps it: ``datasets--ORG--NAME/blobs/<sha256>``
    and ``snapshots/<revision>/<path>`` relative symlinks to them, ``refs/main``.  Returns the
    snapshot folder."""
    repo = cache / ("datasets--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    for name, data in files().items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, link.parent), link)
    return snapshot


# --- v1.1: Harbor task folders (mercor/apex-agents-v1.1) ---------------------------------------

V11_PREAMBLE = (
    "## Your working environment\n\n"
    "You are working inside a simulated workplace that is exposed to you over MCP by the\n"
    "`world` server. The container you run in is intentionally empty.\n\n"
    "Applications available in this workspace: {apps}.\n\n"
    "---\n\n"
)

# Archipelago's server names in a v1.1 world's mcp_config.json, by service name.
V11_SERVERS = {
    "Calendar": "calendar_server",
    "Chat": "chat_server",
    "Code Execution": "code_execution_server",
    "Excel": "sheets_server",
    "Filesystem": "filesystem_server",
    "Mail": "mail_server",
    "PDFs": "pdf_server",
    "Powerpoint": "slides_server",
    "Word": "docs_server",
    "Edgar SEC": "edgar_sec",
    "FMP": "fmp_server",
}


# What the conversion writes for a task graded from world files: both snapshots as artifacts
# of the world service, and the collect step that leaves the final one.
V11_SNAPSHOT_ARTIFACTS = (
    'artifacts = ["/logs/agent/trajectory.json", '
    '{ source = "/logs/world/final_snapshot.tar.gz", service = "world" }, '
    '{ source = "/logs/world/initial_snapshot.tar.gz", service = "world" }]\n'
)
V11_COLLECT = (
    '\n[[verifier.collect]]\nservice = "world"\ntimeout_sec = 660\n'
    'command = "python /app/tools/collect_world_snapshot.py"\n'
)


def _tar(members: dict[str, bytes]) -> bytes:
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in sorted(members.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def task_dir_name(task: dict[str, Any]) -> str:
    return f"mercor-{task['task_name'].lower().replace('_', '-')}-{task['task_id'].split('_', 1)[1][:8]}"


def v11_files() -> dict[str, bytes]:
    """Every file of a v1.1 replica (same tasks and worlds as v1) by its path."""
    v1 = files()
    out: dict[str, bytes] = {}
    registry_tasks = []
    worlds_by_id = {w["world_id"]: w for w in worlds()}
    for world_id, world in worlds_by_id.items():
        with zipfile.ZipFile(io.BytesIO(v1[f"world_files_zipped/{world_id}.zip"])) as archive:
            members = {info.filename: archive.read(info) for info in archive.infolist() if not info.is_dir()}
        for subsystem, name in (("filesystem", "filesystem.tar.gz"), (".apps_data", "apps_data.tar.gz")):
            part = {k.split("/", 1)[1]: v for k, v in members.items() if k.startswith(subsystem + "/")}
            if part:
                out[f"worlds/{world_id}/{name}"] = _tar(part)
        servers = {
            V11_SERVERS[app["service_name"]]: {"transport": "stdio", "command": "uv"} for app in world["apps"]
        }
        out[f"worlds/{world_id}/mcp_config.json"] = json.dumps({"mcpServers": servers}, indent=2).encode()
    for task in tasks():
        folder = f"tasks/{task_dir_name(task)}"
        world = worlds_by_id[task["world_id"]]
        apps = ", ".join(app["service_name"] for app in world["apps"])
        out[f"{folder}/instruction.md"] = (V11_PREAMBLE.format(apps=apps) + task["prompt"] + "\n").encode()
        snapshot = task["expected_output"] not in (None, "message_in_console")
        out[f"{folder}/task.toml"] = (
            'schema_version = "1.3"\n'
            + (V11_SNAPSHOT_ARTIFACTS if snapshot else 'artifacts = ["/logs/agent/trajectory.json"]\n')
            + "\n[task]\n"
            f'name = "mercor/{task_dir_name(task)}"\ndescription = {json.dumps(task["prompt"][:180])}\n'
            'keywords = ["agents", "mcp"]\n\n[metadata]\n'
            f'task_id = "{task["task_id"]}"\nworld_id = "{task["world_id"]}"\n'
            f"domain = {json.dumps(task['domain'])}\nexpected_output = {json.dumps(task['expected_output'] or '')}\n\n"
            '[agent]\ntimeout_sec = 3600\n\n[verifier]\nenvironment_mode = "separate"\n'
            + (V11_COLLECT if snapshot else "")
        ).encode()
        if snapshot:  # the marker: a missing snapshot is a grading error, not an empty diff
            out[f"{folder}/tests/needs_snapshot"] = b""
        out[f"{folder}/environment/docker-compose.yaml"] = (
            f'services:\n  world:\n    volumes:\n      - "../../../worlds/{task["world_id"]}:/world:ro"\n'
        ).encode()
        verifiers = [
            {
                "verifier_id": c["verifier_id"],
                "verifier_version": 1,
                "world_id": task["world_id"],
                "task_id": task["task_id"],
                "eval_config_id": "ec_output_llm",
                "verifier_values": {"criteria": c["criteria"], "is_primary_objective": i == 0},
                "verifier_index": i,
                "verifier_dependencies": None,
            }
            for i, c in enumerate(task["rubric"])
        ]
        grading = {
            "metadata": {
                "task_id": task["task_id"],
                "task_name": task["task_name"],
                "world_id": task["world_id"],
                "domain": task["domain"],
                "expected_output": task["expected_output"],
            },
            "grading_settings": {"llm_judge_model": "openai/gpt-5.2", "llm_judge_extra_args": None},
            "verifiers": verifiers,
            "eval_configs": [{"eval_config_id": "ec_output_llm", "eval_defn_id": "output_llm"}],
            "scoring_config": {"scoring_config_id": "sc_default", "scoring_defn_id": "template"},
        }
        out[f"{folder}/tests/grading_config.json"] = json.dumps(grading, indent=2).encode()
        out[f"{folder}/tests/Dockerfile"] = b"FROM archipelago-harbor-verifier:v1\nCOPY . /tests/\n"
        text = task["gold_response"] if task["gold_response_type"] == "text" else ""
        gold_files_prefix = f"gold_files/{task['task_id']}/"
        has_files = any(name.startswith(gold_files_prefix) for name in v1)
        out[f"{folder}/tests/golden_responses.json"] = json.dumps(
            [
                {
                    "golden_text_response": text,
                    "golden_file_responses": None if text else task["gold_response"],
                    "golden_files_path": gold_files_prefix.rstrip("/") if has_files else None,
                }
            ]
        ).encode()
        if text:
            out[f"{folder}/tests/golden_reference.txt"] = (text + "\n").encode()
        for name, data in v1.items():
            if name.startswith(f"task_files/{task['task_id']}/"):
                out[f"{folder}/environment/task_files/" + name.split("/", 2)[2]] = data
            if name.startswith(gold_files_prefix):
                out[name] = data
        registry_tasks.append({"name": f"mercor/{task_dir_name(task)}", "path": folder})
    out["registry.json"] = json.dumps(
        [{"name": "apex-agents-v1.1", "version": "1.0", "description": "replica", "tasks": registry_tasks}]
    ).encode()
    out["run_task.sh"] = b"#!/usr/bin/env bash\n"
    return out


def write_v11_directory(root: Path) -> Path:
    for name, data in v11_files().items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def file_task_trial(benchmark_dir: Path, name: str = "replica") -> tuple[Any, Any]:
    """The benchmark at ``benchmark_dir`` and the one trial of :data:`FILE_TASK` that the
    replay agent runs in it (an experiment called ``name``)."""
    from atoll.experiment import ExperimentSpec
    from atoll.loader import load_benchmark
    from orchestrator.planner import plan_trials

    benchmark = load_benchmark(benchmark_dir)
    spec = ExperimentSpec.model_validate(
        {
            "name": name,
            "benchmark": benchmark.root,
            "tasks": {"ids": [FILE_TASK]},
            "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
        }
    )
    (trial,) = plan_trials(benchmark, spec)
    return benchmark, trial
