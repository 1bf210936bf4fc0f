"""Load and validate a benchmark directory in the public APEX-Agents layout (DESIGN §4).

    tasks_and_rubrics.json            array of tasks
    world_descriptions.json           array of worlds
    world_files_zipped/<world>.zip    filesystem/ and/or .apps_data/ at the top level
    task_files/<task_id>/             optional overlay: filesystem/… and .apps_data/…

Every problem is reported as an AtollError(code="bad_benchmark") whose message names the
file, the task or world, and what is wrong.  Unknown fields are kept on the models.
"""

from __future__ import annotations

import json
import stat
import zipfile
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from atoll.benchmark import Benchmark, Task, World
from atoll.errors import AtollError, describe_validation
from atoll.members import UnsafeArchive, clean_member_name, is_junk, split_world_member

TASKS_FILE = "tasks_and_rubrics.json"
WORLDS_FILE = "world_descriptions.json"
WORLD_ZIPS_DIR = "world_files_zipped"
TASK_FILES_DIR = "task_files"
WORLD_SUBTREES = ("filesystem", ".apps_data")

HF_PREFIX = "hf://"


def _fail(message: str) -> AtollError:
    return AtollError("bad_benchmark", message)


def resolve_benchmark_path(location: str | Path) -> Path:
    """A local directory, or ``hf://ORG/DATASET[@REVISION]`` downloaded with huggingface_hub.

    Raises AtollError when the directory does not exist, huggingface_hub is not installed,
    or the download fails (offline, gated dataset, unknown id).
    """
    text = str(location)
    if not text.startswith(HF_PREFIX):
        path = Path(text).expanduser()
        if not path.is_dir():
            raise _fail(f"{path}: not a directory")
        return path.resolve()
    repo_id, _, revision = text.removeprefix(HF_PREFIX).partition("@")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise _fail(
            f"{text}: downloading from Hugging Face needs huggingface_hub (pip install 'atoll[hf]')"
        ) from None
    try:
        local = snapshot_download(repo_id=repo_id, repo_type="dataset", revision=revision or None)
    except Exception as exc:  # the hub raises many types: offline, gated, 404
        raise _fail(
            f"{text}: could not download the dataset ({type(exc).__name__}: {exc}); "
            "check the network, the dataset id and HF_TOKEN for gated datasets"
        ) from None
    return Path(local)


def _read_json_array(path: Path) -> list[Any]:
    if not path.is_file():
        raise _fail(f"{path}: missing (an APEX benchmark directory needs {path.name})")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise _fail(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise _fail(f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    if not isinstance(value, list):
        raise _fail(f"{path}: expected a JSON array, found {type(value).__name__}")
    return value


def _parse_records(path: Path, records: list[Any], model: type, id_field: str) -> list[Any]:
    parsed = []
    seen: dict[str, int] = {}
    for index, record in enumerate(records):
        label = f"{path.name}[{index}]"
        if isinstance(record, dict) and isinstance(record.get(id_field), str):
            label += f" ({id_field}={record[id_field]!r})"
        try:
            item = model.model_validate(record)
        except ValidationError as exc:
            raise _fail(f"{path}: {label}: {describe_validation(exc)}") from None
        key = getattr(item, id_field)
        if key in seen:
            raise _fail(f"{path}: duplicate {id_field} {key!r} (records {seen[key]} and {index})")
        seen[key] = index
        parsed.append(item)
    return parsed


def check_member_name(name: str) -> str | None:
    """Why an archive member name is unsafe to extract, or None when it is fine
    (the rules of :mod:`atoll.members`, shared with populate and the grader)."""
    try:
        clean_member_name(name)
    except UnsafeArchive as exc:
        return exc.problem
    return None


def _zip_member_problem(info: zipfile.ZipInfo) -> str | None:
    problem = check_member_name(info.filename)
    if problem:
        return problem
    # Unix file type bits, when the archiver recorded them (Windows archivers do not).
    file_type = stat.S_IFMT(info.external_attr >> 16)
    if file_type == stat.S_IFLNK:
        return "is a symbolic link (a world archive holds files and folders only)"
    if file_type and file_type not in (stat.S_IFREG, stat.S_IFDIR):
        return "is not a regular file or directory"
    return None


def inspect_world_zip(path: Path, *, verify: bool = False) -> dict[str, int]:
    """Validate a world archive and count its files per top-level subtree.

    Member names follow :mod:`atoll.members` (``\\`` is a separator, ``apps_data/`` is
    ``.apps_data/``); desktop-archiver litter (``__MACOSX/``, ``.DS_Store``, …) is skipped
    and counted under ``"skipped"``. With ``verify`` every member's CRC is checked (reads
    the whole archive). Raises AtollError for a missing or corrupt archive, an unsafe member
    name (absolute, ``..``, reserved), a link or device, or a member outside ``filesystem/``
    and ``.apps_data/``.
    """
    if not path.is_file():
        raise _fail(f"{path}: world archive missing")
    try:
        with zipfile.ZipFile(path) as archive:
            counts = dict.fromkeys((*WORLD_SUBTREES, "skipped"), 0)
            for info in archive.infolist():
                problem = _zip_member_problem(info)
                if problem:
                    raise _fail(f"{path}: member {info.filename!r} {problem}")
                name = clean_member_name(info.filename)
                if name is None:
                    continue
                if is_junk(name):
                    counts["skipped"] += 1
                    continue
                tree = split_world_member(name)
                if tree is None:
                    raise _fail(f"{path}: member {info.filename!r} is outside filesystem/ and .apps_data/")
                if not info.is_dir():
                    counts[tree[0]] += 1
            if verify:
                bad = archive.testzip()
                if bad is not None:
                    raise _fail(f"{path}: member {bad!r} is corrupt (CRC mismatch)")
    except zipfile.BadZipFile as exc:
        raise _fail(f"{path}: corrupt zip archive ({exc})") from None
    except (zipfile.LargeZipFile, OSError, EOFError) as exc:
        raise _fail(f"{path}: unreadable zip archive ({exc})") from None
    return counts


def _check_overlay(task_id: str, folder: Path) -> None:
    """Overlay files live under filesystem/ and .apps_data/ (anything else is ignored);
    a symlink pointing outside the task's folder is an error."""
    root = folder.resolve()
    for entry in sorted(folder.rglob("*")):
        if entry.is_symlink() and not entry.resolve().is_relative_to(root):
            raise _fail(f"{entry}: task {task_id!r} overlay has a symlink pointing outside its folder")


def load_benchmark(location: str | Path, *, verify_archives: bool = False) -> Benchmark:
    """Load and validate a benchmark (directory or ``hf://`` id).

    Checks: both JSON files present and well-formed; every task and world valid (non-empty
    rubric, required fields); no duplicate task, world or verifier ids; every task's world
    is described and has a readable, safe archive; task overlays stay inside their folder.
    Raises AtollError(code="bad_benchmark") naming the first problem found.
    """
    root = resolve_benchmark_path(location)
    worlds = _parse_records(root / WORLDS_FILE, _read_json_array(root / WORLDS_FILE), World, "world_id")
    tasks = _parse_records(root / TASKS_FILE, _read_json_array(root / TASKS_FILE), Task, "task_id")
    known_worlds = {world.world_id for world in worlds}

    for task in tasks:
        if task.world_id not in known_worlds:
            raise _fail(
                f"{root / TASKS_FILE}: task {task.task_id!r} points at unknown world {task.world_id!r} "
                f"(not in {WORLDS_FILE})"
            )
        verifier_ids = [criterion.verifier_id for criterion in task.rubric]
        repeated = sorted({v for v in verifier_ids if verifier_ids.count(v) > 1})
        if repeated:
            raise _fail(f"{root / TASKS_FILE}: task {task.task_id!r} repeats verifier_id {repeated[0]!r}")

    archives: dict[str, str] = {}
    used = {task.world_id for task in tasks}
    for world in worlds:
        archive = root / WORLD_ZIPS_DIR / f"{world.world_id}.zip"
        # A described world no task uses may lack its archive; one a task needs may not.
        if archive.exists() or world.world_id in used:
            inspect_world_zip(archive, verify=verify_archives)
            archives[world.world_id] = str(archive)

    overlays: dict[str, str] = {}
    for task in tasks:
        folder = root / TASK_FILES_DIR / task.task_id
        if folder.is_dir():
            _check_overlay(task.task_id, folder)
            overlays[task.task_id] = str(folder)

    return Benchmark(
        root=str(root), tasks=tasks, worlds=worlds, world_archives=archives, task_overlays=overlays
    )


def load_task(location: str | Path, task_id: str) -> Task:
    """Task ``task_id`` of the benchmark at ``location``; AtollError ``bad_input`` naming both
    when the benchmark has no such task."""
    benchmark = load_benchmark(location)
    try:
        return benchmark.task(task_id)
    except KeyError:
        raise AtollError("bad_input", f"--task-id {task_id!r}: no such task in {location}") from None


def summarize(benchmark: Benchmark) -> dict[str, Any]:
    """Counts a user checks before running: tasks per domain, files per world, criteria per
    task (mean/min/max), expected output types, checks and gold outputs present."""
    criteria = [len(task.rubric) for task in benchmark.tasks]
    domains: dict[str, int] = {}
    outputs: dict[str, int] = {}
    for task in benchmark.tasks:
        domains[task.domain or "(none)"] = domains.get(task.domain or "(none)", 0) + 1
        kind = str(task.expected_output or "(unspecified)")
        outputs[kind] = outputs.get(kind, 0) + 1
    worlds = []
    for world in benchmark.worlds:
        archive = benchmark.world_archives.get(world.world_id)
        counts = inspect_world_zip(Path(archive)) if archive else dict.fromkeys(WORLD_SUBTREES, 0)
        worlds.append(
            {
                "world_id": world.world_id,
                "world_name": world.world_name,
                "tasks": sum(task.world_id == world.world_id for task in benchmark.tasks),
                "files": counts["filesystem"],
                "app_data_files": counts[".apps_data"],
                "skipped_members": counts.get("skipped", 0),
            }
        )
    return {
        "root": benchmark.root,
        "tasks": len(benchmark.tasks),
        "worlds": worlds,
        "tasks_per_domain": dict(sorted(domains.items())),
        "expected_outputs": dict(sorted(outputs.items())),
        "criteria_per_task": {
            "total": sum(criteria),
            "mean": round(sum(criteria) / len(criteria), 2) if criteria else 0.0,
            "min": min(criteria, default=0),
            "max": max(criteria, default=0),
        },
        "criteria_with_check": sum(c.check is not None for t in benchmark.tasks for c in t.rubric),
        "tasks_with_gold_output": sum(t.gold_output is not None for t in benchmark.tasks),
        "tasks_with_reference_solution": sum(t.reference_solution is not None for t in benchmark.tasks),
        "tasks_with_input_files": len(benchmark.task_overlays),
    }
