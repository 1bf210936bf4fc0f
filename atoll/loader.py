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
import re
import stat
import zipfile
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from atoll.apps import unavailable_apps
from atoll.benchmark import Benchmark, Task, World
from atoll.coworkers import MAX_PERSONAS_BYTES, PERSONAS_FILE, PersonaSummary, parse_personas
from atoll.errors import AtollError, ErrorCode, describe_validation
from atoll.gold_outputs import read_gold_output
from atoll.hf_cache import LocalView, download, local_view
from atoll.members import (
    UnsafeArchive,
    clean_member_name,
    is_junk,
    is_zip_symlink,
    split_world_member,
    zip_file_type,
)

TASKS_FILE = "tasks_and_rubrics.json"
WORLDS_FILE = "world_descriptions.json"
WORLD_ZIPS_DIR = "world_files_zipped"
TASK_FILES_DIR = "task_files"
WORLD_SUBTREES = ("filesystem", ".apps_data")

HF_PREFIX = "hf://"
#: A revision as a Git ref or commit names it: ``main``, ``v1.0``, ``refs/pr/1``, a hash. It is
#: joined to a cache folder by huggingface_hub (``refs/<revision>``, read offline), so ``..``,
#: an absolute path or an empty component would read (and, online, write) outside the cache.
_HF_REVISION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*")


def _fail(message: str) -> AtollError:
    return AtollError(ErrorCode.bad_benchmark, message)


def resolve_benchmark_path(location: str | Path) -> Path:
    """A local directory, or ``hf://ORG/DATASET[@REVISION]`` from the Hugging Face cache
    (downloaded first when online; with ``HF_HUB_OFFLINE=1`` the cached snapshot only).

    Raises AtollError when the directory does not exist, huggingface_hub is not installed,
    or the download fails (offline without a cached copy, gated dataset, unknown id).
    """
    text = str(location)
    if not text.startswith(HF_PREFIX):
        path = Path(text).expanduser()
        if not path.is_dir():
            raise _fail(f"{path}: not a directory")
        # Not resolved: a cache snapshot must keep its place under snapshots/ (see hf_cache).
        return path.absolute()
    repo_id, _, revision = text.removeprefix(HF_PREFIX).partition("@")
    try:
        from huggingface_hub.utils import HFValidationError, validate_repo_id
    except ImportError:
        raise _fail(
            f"{text}: downloading from Hugging Face needs huggingface_hub (pip install 'atoll[hf]')"
        ) from None
    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        raise _fail(f"{text}: not a dataset id ({exc})") from None
    if revision and (len(revision) > 256 or ".." in revision or not _HF_REVISION.fullmatch(revision)):
        raise _fail(
            f"{text}: revision {revision!r} is not a branch, tag or commit name (letters, digits, "
            "'.', '_', '-' and '/' between names; no '..', no leading '/')"
        )
    return download(repo_id, revision or None)


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


_Record = TypeVar("_Record", bound=BaseModel)


def _parse_records(path: Path, records: list[Any], model: type[_Record], id_field: str) -> list[_Record]:
    parsed: list[_Record] = []
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
    if is_zip_symlink(info):
        return "is a symbolic link (a world archive holds files and folders only)"
    # Unix file type bits, when the archiver recorded them (Windows archivers do not).
    file_type = zip_file_type(info)
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


def _market_data_files(archive: Path) -> int:
    """Fixture files the world zip carries under .apps_data/market_data/ (member names read
    by the rules of atoll.members, so ``apps_data/market_data/`` counts too)."""
    count = 0
    with zipfile.ZipFile(archive) as opened:
        for info in opened.infolist():
            name = None if info.is_dir() or is_zip_symlink(info) else clean_member_name(info.filename)
            tree = split_world_member(name) if name and not is_junk(name) else None
            if tree is not None and tree[0] == ".apps_data" and tree[1].startswith("market_data/"):
                count += 1
    return count


def world_personas(archive: Path) -> list[PersonaSummary]:
    """The personas a world zip holds (``.apps_data/coworkers/personas.json``), as the listing
    shows them; empty when it holds none. AtollError(bad_benchmark) naming the archive when
    the file is invalid or larger than it may be (docs/coworkers.md)."""
    with zipfile.ZipFile(archive) as opened:
        for info in opened.infolist():
            name = None if info.is_dir() or is_zip_symlink(info) else clean_member_name(info.filename)
            if name is None or split_world_member(name) != (".apps_data", PERSONAS_FILE):
                continue
            if info.file_size > MAX_PERSONAS_BYTES:
                raise _fail(f"{archive}: {name}: {info.file_size} bytes, more than {MAX_PERSONAS_BYTES}")
            try:
                personas = parse_personas(opened.read(info), source=f"{archive.name}: {name}")
            except AtollError as exc:
                raise _fail(exc.message) from None
            return [
                PersonaSummary(name=p.name, email=p.email, role=p.role, channels=p.channels) for p in personas
            ]
    return []


def _index_file(view: LocalView, path: Path) -> Path:
    """The plain file to read for the index file ``path``: in a plain folder the path itself
    (a link there is read where it points, as ever), in the cache its blob."""
    if not view.in_cache:
        return path
    if not view.exists(path):
        raise _fail(f"{path}: missing (an APEX benchmark directory needs {path.name})")
    return view.file(path)


def detect_layout(root: Path) -> str:
    """``apex-v1`` (tasks_and_rubrics.json) or ``apex-v1.1`` (Harbor ``tasks/*/task.toml``)."""
    if (root / TASKS_FILE).exists():
        return "apex-v1"
    if (root / "tasks").is_dir() and any((root / "tasks").glob("*/task.toml")):
        return "apex-v1.1"
    return "apex-v1"


def load_benchmark(location: str | Path, *, verify_archives: bool = False) -> Benchmark:
    """Load and validate a benchmark (directory or ``hf://`` id) in the v1 or v1.1 layout.

    Checks: the index files present and well-formed; every task and world valid (non-empty
    rubric, required fields, known grading targets); no duplicate task, world or verifier
    ids; every task's world is described and has a readable, safe archive; task overlays stay
    inside their folder; gold files present where ``gold_response_type`` is ``"file"``.
    Inside the Hugging Face cache only the cache's own links to its blobs are followed.
    Raises AtollError(code="bad_benchmark") naming the first problem found.
    """
    root = resolve_benchmark_path(location)
    # The one look at the hub cache: from here on every file is a plain path of the view.
    view = local_view(root)
    if detect_layout(root) == "apex-v1.1":
        from atoll.loader_harbor import load_harbor_benchmark

        return load_harbor_benchmark(view, verify_archives=verify_archives)
    worlds_file, tasks_file = root / WORLDS_FILE, root / TASKS_FILE
    worlds_text = _read_json_array(_index_file(view, worlds_file))
    tasks_text = _read_json_array(_index_file(view, tasks_file))
    worlds = _parse_records(worlds_file, worlds_text, World, "world_id")
    tasks = _parse_records(tasks_file, tasks_text, Task, "task_id")
    check_tasks(root / TASKS_FILE, tasks, worlds)

    archives: dict[str, str] = {}
    unavailable: dict[str, dict[str, str]] = {}
    personas: dict[str, list[PersonaSummary]] = {}
    used = {task.world_id for task in tasks}
    for world in worlds:
        archive = root / WORLD_ZIPS_DIR / f"{world.world_id}.zip"
        # A described world no task uses may lack its archive; one a task needs may not.
        if archive.exists() or archive.is_symlink() or world.world_id in used:
            archive = view.file(archive)
            inspect_world_zip(archive, verify=verify_archives)
            archives[world.world_id] = str(archive)
        if world.world_id in archives and (found := world_personas(Path(archives[world.world_id]))):
            personas[world.world_id] = found
        market = _market_data_files(Path(archives[world.world_id])) if world.world_id in archives else 0
        missing = unavailable_apps(world, market_data_files=market)
        if missing:
            unavailable[world.world_id] = missing

    overlays: dict[str, str] = {}
    warnings: list[str] = []
    for index, task in enumerate(tasks):
        folder = root / TASK_FILES_DIR / task.task_id
        if task.task_input_files and not folder.is_dir():
            # A partial download: the task would run without the files its prompt refers to.
            warnings.append(
                f"task {task.task_id!r}: task_input_files is {task.task_input_files!r} but "
                f"{TASK_FILES_DIR}/{task.task_id}/ is missing; it will run without its input files"
            )
        if folder.is_dir():
            if view.in_cache:
                overlays[task.task_id] = str(view.plain_tree(folder))
            else:
                _check_overlay(task.task_id, folder)
                overlays[task.task_id] = str(folder)
        gold = read_gold_output(view, task)
        if gold is not None and task.gold_output is None:
            tasks[index] = task.model_copy(update={"gold_output": gold})

    return Benchmark(
        root=str(root),
        tasks=tasks,
        worlds=worlds,
        world_archives=archives,
        task_overlays=overlays,
        unavailable_apps=unavailable,
        warnings=warnings,
        world_personas=personas,
    )


def check_tasks(where: Path, tasks: list[Task], worlds: list[World]) -> None:
    """Every task's world is described and its verifier ids are unique; raises AtollError."""
    known_worlds = {world.world_id for world in worlds}
    for task in tasks:
        if task.world_id not in known_worlds:
            raise _fail(
                f"{where}: task {task.task_id!r} points at unknown world {task.world_id!r} "
                f"(not in {WORLDS_FILE})"
            )
        verifier_ids = [criterion.verifier_id for criterion in task.rubric]
        repeated = sorted({v for v in verifier_ids if verifier_ids.count(v) > 1})
        if repeated:
            raise _fail(f"{where}: task {task.task_id!r} repeats verifier_id {repeated[0]!r}")


def load_task(location: str | Path, task_id: str) -> Task:
    """Task ``task_id`` of the benchmark at ``location``; AtollError ``bad_input`` naming both
    when the benchmark has no such task."""
    benchmark = load_benchmark(location)
    try:
        return benchmark.task(task_id)
    except KeyError:
        raise AtollError(ErrorCode.bad_input, f"--task-id {task_id!r}: no such task in {location}") from None


def summarize(benchmark: Benchmark) -> dict[str, Any]:
    """Counts a user checks before running: tasks per domain, files per world, criteria per
    task (mean/min/max), expected output types, grading targets (explicit or derived),
    checks, gold outputs (text answers and files), and apps atoll cannot serve with the
    tasks they affect."""
    criteria = [len(task.rubric) for task in benchmark.tasks]
    domains: dict[str, int] = {}
    outputs: dict[str, int] = {}
    targets: dict[str, int] = {}
    for task in benchmark.tasks:
        domains[task.domain or "(none)"] = domains.get(task.domain or "(none)", 0) + 1
        kind = str(task.expected_output or "(unspecified)")
        outputs[kind] = outputs.get(kind, 0) + 1
        for criterion in task.rubric:
            origin = "explicit" if criterion.grading_target is not None else "derived"
            label = f"{task.grading_target_for(criterion).kind} ({origin})"
            targets[label] = targets.get(label, 0) + 1
    worlds = []
    for world in benchmark.worlds:
        worlds.append(
            {
                "world_id": world.world_id,
                "world_name": world.world_name,
                "tasks": sum(task.world_id == world.world_id for task in benchmark.tasks),
                **_world_file_counts(benchmark, world.world_id),
            }
        )
    golds = [task.gold_output for task in benchmark.tasks if task.gold_output is not None]
    unavailable = []
    for world_id, apps in sorted(benchmark.unavailable_apps.items()):
        affected = [task.task_id for task in benchmark.tasks if task.world_id == world_id]
        for app, reason in sorted(apps.items()):
            unavailable.append({"world_id": world_id, "app": app, "reason": reason, "tasks": affected})
    return {
        "root": benchmark.root,
        "layout": benchmark.layout,
        "tasks": len(benchmark.tasks),
        "worlds": worlds,
        "tasks_per_domain": dict(sorted(domains.items())),
        "expected_outputs": dict(sorted(outputs.items())),
        "grading_targets": dict(sorted(targets.items())),
        "criteria_per_task": {
            "total": sum(criteria),
            "mean": round(sum(criteria) / len(criteria), 2) if criteria else 0.0,
            "min": min(criteria, default=0),
            "max": max(criteria, default=0),
        },
        "criteria_with_check": sum(c.check is not None for t in benchmark.tasks for c in t.rubric),
        "tasks_with_gold_output": len(golds),
        "gold_text_answers": sum(bool(gold.answer) for gold in golds),
        "gold_files": sum(len(gold.files) for gold in golds),
        "tasks_with_reference_solution": sum(t.reference_solution is not None for t in benchmark.tasks),
        "tasks_with_input_files": len(benchmark.task_overlays),
        "unavailable_apps": unavailable,
        "tasks_needing_unavailable_apps": sorted({t for entry in unavailable for t in entry["tasks"]}),
        "tasks_without_snapshot_collect": _without_snapshot_collect(benchmark),
        "criteria_by_task": [
            {
                "task_id": task.task_id,
                "task_name": task.task_name,
                "world_id": task.world_id,
                "criteria": [
                    {"verifier_id": criterion.verifier_id, "criteria": criterion.criteria}
                    for criterion in task.rubric
                ],
            }
            for task in benchmark.tasks
        ],
        "warnings": list(benchmark.warnings),
    }


def _without_snapshot_collect(benchmark: Benchmark) -> list[str]:
    """v1.1 (Harbor) tasks graded from world files whose task.toml collects no final snapshot."""
    if benchmark.layout != "apex-v1.1":
        return []
    from atoll.loader_harbor import collects_snapshot, needs_world_files

    return [t.task_id for t in benchmark.tasks if needs_world_files(t) and not collects_snapshot(t)]


def _world_file_counts(benchmark: Benchmark, world_id: str) -> dict[str, int]:
    if world_id in benchmark.world_seeds:
        from atoll.loader_harbor import seed_file_counts

        counts = seed_file_counts(benchmark.world_seeds[world_id])
    elif world_id in benchmark.world_archives:
        counts = inspect_world_zip(Path(benchmark.world_archives[world_id]))
    else:
        counts = dict.fromkeys(WORLD_SUBTREES, 0)
    return {
        "files": counts["filesystem"],
        "app_data_files": counts[".apps_data"],
        "skipped_members": counts.get("skipped", 0),
    }
