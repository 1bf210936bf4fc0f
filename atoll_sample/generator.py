"""Generate the sample benchmark: two worlds, their tasks and gold outputs, in the APEX layout."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from atoll.benchmark import Task, World
from atoll.errors import AtollError, ErrorCode
from atoll_sample import (
    banking_tasks,
    consulting_comms_tasks,
    consulting_files,
    consulting_tasks,
    coworkers,
    deal_files,
    deal_legal,
    deal_market,
    law_tasks,
)
from atoll_sample._files import FROZEN_AT, zip_tree
from atoll_sample._world import WorldDraft
from atoll_sample.people import ELENA, PRIYA
from atoll_sample.render import apps_from_data, files_from_data

# What the generator writes at the top of OUT (and replaces on every run).
OUTPUTS = (
    "tasks_and_rubrics.json",
    "world_descriptions.json",
    "world_files_zipped",
    "task_files",
    "gold_files",
)

# The nine apps every APEX world lists (service ids as the published dataset has them), and
# the two market-data apps of its investment-banking worlds.
_STANDARD_APPS = (
    ("svc_a3ac7e47956c43048235dbd25d8c849d", "Calendar"),
    ("svc_eec407c6dffc45579b7a4025f8439fe2", "Chat"),
    ("svc_bd6a6280b337424cb5e6e4959301520f", "Code Execution"),
    ("svc_2293fbde36334312996ecfeaca4e978b", "Excel"),
    ("svc_aba5e37188c745fba2bbd575545a9743", "Filesystem"),
    ("svc_56aff339e48c4f0aaa111988ca7c0b12", "Mail"),
    ("svc_bd0089edc9eb45df9b459b7b9d47f44f", "PDFs"),
    ("svc_8361cf10b2f84ed78225902d0a6a4255", "Powerpoint"),
    ("svc_5d56252d4260473284737585ad91eeb3", "Word"),
)
_MARKET_APPS = (
    ("svc_f5802ff259f6474b8f27bd11cd42e4fe", "Edgar SEC"),
    ("svc_0f1a736de09143968916bf5816b9b36c", "FMP"),
)


@dataclass(frozen=True)
class _WorldPlan:
    world_id: str
    name: str
    description: str
    domain: str
    user: dict[str, str]
    steps: tuple[Callable[[WorldDraft], None], ...]
    tasks: tuple[Callable[[WorldDraft, Path], list[Task]], ...]
    apps: tuple[tuple[str, str], ...] = _STANDARD_APPS


_WORLDS = (
    _WorldPlan(
        "world_keystone_consulting",
        "Project Keystone - Meridian Partners procurement engagement at Halvorsen Foods",
        "A management consulting engagement: Meridian Partners helps Halvorsen Foods (six food plants in North "
        "America and Europe) cut third-party spend. Shared drive with the spend cube, SteerCo decks, interim report "
        "and interview notes; the engagement manager's mail, calendar and team chat.",
        "Management Consulting",
        PRIYA,
        (
            files_from_data("keystone_engagement", consulting_files.compute),
            files_from_data("keystone_background"),
            apps_from_data("keystone_apps"),
            coworkers.build_keystone_personas,
        ),
        (consulting_tasks.build_tasks, consulting_comms_tasks.build_tasks, coworkers.build_tasks),
    ),
    _WorldPlan(
        "world_atlas_mna",
        "Project Atlas - Corvane Industrial's acquisition of Lumen Sensors",
        "A sell-side auction in which Corvane Industrial bids for Lumen Sensors: data room (financials, material "
        "contracts, litigation), valuation files from the bank, SPA and disclosure schedule drafts from counsel, and the "
        "corporate development director's mail, calendar and deal chat, and market data (quotes, rates, filings).",
        "Investment Banking",
        ELENA,
        (
            files_from_data("atlas_financials", deal_files.compute),
            files_from_data("atlas_background"),
            files_from_data("atlas_legal", deal_legal.compute),
            apps_from_data("atlas_apps"),
            deal_market.build_files,
            coworkers.build_atlas_personas,
        ),
        (banking_tasks.build_tasks, law_tasks.build_tasks, deal_market.build_tasks),
        tuple(sorted(_STANDARD_APPS + _MARKET_APPS, key=lambda app: app[1])),
    ),
)


def generate_sample_benchmark(out_dir: Path, *, seed: int = 0) -> Path:
    """Write the sample benchmark (APEX layout) into ``out_dir`` and return it.

    Writes ``tasks_and_rubrics.json``, ``world_descriptions.json``,
    ``world_files_zipped/<world_id>.zip``, ``task_files/<task_id>/filesystem/…`` and
    ``gold_files/<task_id>/filesystem/…``, replacing those entries if present (nothing else in
    ``out_dir`` is touched).  The same ``seed`` gives byte-identical files.  Raises
    AtollError when ``out_dir`` exists and is not a directory.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise AtollError(
            ErrorCode.bad_input, f"sample benchmark output {out_dir}: exists and is not a directory"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in OUTPUTS:
        target = out_dir / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    tasks: list[Task] = []
    worlds: list[World] = []
    with tempfile.TemporaryDirectory(prefix="atoll-sample-") as scratch:
        for plan in _WORLDS:
            draft = WorldDraft(
                plan.world_id,
                Path(scratch) / plan.world_id,
                random.Random(f"{seed}:{plan.world_id}"),
                plan.user,
            )
            for build in plan.steps:
                build(draft)
            for build_tasks in plan.tasks:
                tasks.extend(build_tasks(draft, out_dir))
            zip_tree(draft.root, out_dir / "world_files_zipped" / f"{plan.world_id}.zip")
            worlds.append(
                World.model_validate(
                    {
                        "world_id": plan.world_id,
                        "world_name": plan.name,
                        "world_description": plan.description,
                        "domain": plan.domain,
                        "apps": [{"service_id": sid, "service_name": name} for sid, name in plan.apps],
                        "user_name": plan.user["name"],
                        "user_email": plan.user["email"],
                        "user_title": f"{plan.user['title']}, {plan.user['company']}",
                        "current_date": FROZEN_AT.date().isoformat(),
                        "seed": seed,
                    }
                )
            )
    _validate(tasks, worlds)
    _write_json(out_dir / "tasks_and_rubrics.json", [_v1_record(task) for task in tasks])
    _write_json(
        out_dir / "world_descriptions.json", [w.model_dump(mode="json", exclude_none=True) for w in worlds]
    )
    return out_dir


def _validate(tasks: list[Task], worlds: list[World]) -> None:
    world_ids = {w.world_id for w in worlds}
    seen: set[str] = set()
    for task in tasks:
        # Round-trip through JSON so what we write is exactly what a loader reads back.
        Task.model_validate_json(task.model_dump_json())
        if task.task_id in seen:
            raise AssertionError(f"duplicate sample task id {task.task_id}")
        seen.add(task.task_id)
        if task.world_id not in world_ids:
            raise AssertionError(f"sample task {task.task_id} names unknown world {task.world_id}")
        if not 1 <= len(task.rubric) <= 6 or not any(c.check for c in task.rubric):
            raise AssertionError(f"sample task {task.task_id}: needs 1-6 criteria, at least one checked")


def _write_json(path: Path, payload: Any) -> None:
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _v1_record(task: Task) -> dict[str, Any]:
    """A task as APEX-Agents v1 publishes it (``gold_response``/``gold_response_type``,
    ``task_input_files`` a snapshot id or null), atoll's checks, grading targets and reference
    solution kept as extra fields.  Gold files are already on disk under ``gold_files/``."""
    record = task.model_dump(mode="json", exclude_none=True, exclude={"gold_output", "task_input_files"})
    gold = task.gold_output
    digest = hashlib.sha256(task.task_id.encode()).hexdigest()
    if gold is not None and gold.files:
        record["gold_response"] = f"snap_{digest[:32]}"
        record["gold_response_type"] = "file"
    else:
        record["gold_response"] = gold.answer if gold is not None else ""
        record["gold_response_type"] = "text"
    record["task_input_files"] = f"snap_{digest[32:]}" if task.task_input_files else None
    return record
