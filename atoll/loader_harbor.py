"""Load APEX-Agents v1.1 (``mercor/apex-agents-v1.1``): Harbor-style task folders.

    registry.json                          [{name, version, tasks: [{name, path}]}] (optional)
    tasks/<dir>/instruction.md             the prompt, after Harbor's environment preamble
    tasks/<dir>/task.toml                  [task] name, description; [metadata] task_id,
                                           world_id, domain, expected_output
    tasks/<dir>/environment/task_files/    the task's overlay: filesystem/…, .apps_data/…
    tasks/<dir>/tests/grading_config.json  {metadata, verifiers: [{verifier_id,
                                           verifier_values: {criteria, …}}], …}
    tasks/<dir>/tests/golden_responses.json [{golden_text_response, golden_files_path}]
    worlds/<world_id>/filesystem.tar.gz    the world, one archive per subsystem, each rooted
    worlds/<world_id>/apps_data.tar.gz     at it; mcp_config.json lists its servers
    tasks/<dir>/tests/needs_snapshot       marker: grading reads world files (a snapshot is required)
    gold_files/<task_id>/filesystem/…      gold files (or the folder golden_files_path names, or
                                           tests/golden/filesystem/…); a gold folder in any other
                                           layout is an error naming the task, never "0 gold files"

Everything is read into the same Benchmark model as v1; a part that cannot be mapped is an
AtollError(bad_benchmark) naming the file and the part.  Inside the Hugging Face cache only
the cache's own links to its blobs are followed.
"""

from __future__ import annotations

import json
import re
import tarfile
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from atoll.apps import unavailable_apps
from atoll.benchmark import Benchmark, GoldFile, GoldOutput, Task, World
from atoll.coworkers import MAX_PERSONAS_BYTES, PERSONAS_FILE, PersonaSummary, parse_personas
from atoll.errors import AtollError, ErrorCode, describe_validation
from atoll.hf_cache import LocalView, local_view

SEED_ARCHIVES = {"filesystem": "filesystem.tar.gz", ".apps_data": "apps_data.tar.gz"}
WORLD_METADATA_FILES = ("world.json", "metadata.json", "world_description.json")
# The preamble Harbor's conversion puts before each prompt, recognised by what it says (the
# ``world`` MCP server, the empty container) rather than by its heading: a block before the
# first ``---`` line that names MCP and the ``world`` server, or the simulated workplace.
_PREAMBLE_SEPARATOR = re.compile(r"^\s*---\s*$", re.MULTILINE)
_PREAMBLE_SIGNS = (
    re.compile(r"\bMCP\b"),
    re.compile(r"`world`|\bworld\b[^\n]{0,40}\bserver\b|simulated workplace", re.IGNORECASE),
)
# expected_output values graded from the final message alone (the conversion's final-answer
# outputs); any other declared output is graded from world files and needs the snapshots.
FINAL_ANSWER_OUTPUTS = frozenset({"message_in_console"})


def _fail(message: str) -> AtollError:
    return AtollError(ErrorCode.bad_benchmark, message)


class _Reader:
    """Reads files of one dataset folder through its plain paths (:class:`LocalView`)."""

    def __init__(self, view: LocalView) -> None:
        self.root = view.root
        self.view = view

    def path(self, path: Path) -> Path:
        return self.view.file(path)

    def exists(self, path: Path) -> bool:
        return self.view.exists(path)

    def text(self, path: Path, what: str) -> str:
        if not self.exists(path):
            raise _fail(f"{path}: missing ({what})")
        try:
            return self.path(path).read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise _fail(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None

    def json(self, path: Path, what: str) -> Any:
        try:
            return json.loads(self.text(path, what))
        except json.JSONDecodeError as exc:
            raise _fail(f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None

    def toml(self, path: Path, what: str) -> dict[str, Any]:
        try:
            return tomllib.loads(self.text(path, what))
        except tomllib.TOMLDecodeError as exc:
            raise _fail(f"{path}: invalid TOML: {exc}") from None


def _task_dirs(root: Path, reader: _Reader) -> list[Path]:
    registry = root / "registry.json"
    if reader.exists(registry):
        entries = reader.json(registry, "the Harbor dataset index")
        dirs = []
        for dataset in entries if isinstance(entries, list) else [entries]:
            for entry in (dataset or {}).get("tasks") or []:
                relative = str(entry.get("path") or "")
                if not relative or relative.startswith("/") or ".." in Path(relative).parts:
                    raise _fail(f"{registry}: task entry {entry!r} has no safe relative path")
                dirs.append(root / relative)
        if dirs:
            return dirs
    return sorted(path.parent for path in (root / "tasks").glob("*/task.toml"))


def strip_preamble(instruction: str) -> str:
    """The task's own prompt: Harbor's environment note (which tells a container agent its
    files are behind the ``world`` MCP server) removed when present, recognised by its content
    (it names MCP and the ``world`` server) whatever its heading."""
    text = instruction.strip()
    separator = _PREAMBLE_SEPARATOR.search(text)
    if separator is not None:
        head = text[: separator.start()]
        if all(sign.search(head) for sign in _PREAMBLE_SIGNS):
            text = text[separator.end() :]
    return text.strip()


def criteria_from_config(config_path: Path, config: dict[str, Any]) -> list[dict[str, Any]]:
    """The rubric records of a grading_config.json, in ``verifier_index`` order."""
    verifiers = config.get("verifiers")
    if not isinstance(verifiers, list) or not verifiers:
        raise _fail(f"{config_path}: 'verifiers' must be a non-empty array (the task's rubric)")
    rubric = []
    for index, verifier in enumerate(sorted(verifiers, key=lambda v: v.get("verifier_index", 0))):
        values = dict((verifier or {}).get("verifier_values") or {})
        criteria = values.pop("criteria", None)
        if not isinstance(criteria, str) or not verifier.get("verifier_id"):
            raise _fail(f"{config_path}: verifiers[{index}] has no verifier_id or verifier_values.criteria")
        extras = {k: v for k, v in verifier.items() if k not in ("verifier_id", "verifier_values")}
        rubric.append({"verifier_id": verifier["verifier_id"], "criteria": criteria, **values, **extras})
    return rubric


def _gold_tree(folder: Path, task_id: str) -> Path | None:
    """The ``filesystem/`` tree of a gold folder; None when the folder is absent or empty.
    Raises AtollError naming the task for a folder in a layout the loader does not know."""
    if not folder.is_dir():
        return None
    tree = folder / "filesystem"
    if tree.is_dir():
        return tree
    entries = sorted(entry.name for entry in folder.iterdir())
    if entries:
        raise _fail(
            f"{folder}: task {task_id!r}: gold files in a layout atoll does not recognise (expected "
            f"filesystem/…, found {', '.join(entries[:5])}{', …' if len(entries) > 5 else ''})"
        )
    return None


def _gold(root: Path, reader: _Reader, tests: Path, task_id: str) -> GoldOutput | None:
    answer = None
    declared: list[Path] = []
    responses_path = tests / "golden_responses.json"
    if reader.exists(responses_path):
        responses = reader.json(responses_path, "gold responses")
        for response in responses if isinstance(responses, list) else [responses]:
            text = (response or {}).get("golden_text_response")
            answer = answer or (text if isinstance(text, str) and text.strip() else None)
            relative = (response or {}).get("golden_files_path")
            if relative:
                if str(relative).startswith("/") or ".." in Path(str(relative)).parts:
                    raise _fail(
                        f"{responses_path}: golden_files_path {relative!r} is not a safe relative path"
                    )
                declared.append(root / str(relative))
    for folder in declared:
        if not folder.is_dir():
            raise _fail(
                f"{responses_path}: task {task_id!r}: golden_files_path {folder.relative_to(root)} "
                "is not a folder of the dataset (its gold files are missing)"
            )
    files: list[GoldFile] = []
    for folder in dict.fromkeys([*declared, root / "gold_files" / task_id, tests / "golden"]):
        tree = _gold_tree(folder, task_id)
        if tree is None:
            if folder in declared:
                raise _fail(f"{folder}: task {task_id!r}: golden_files_path names an empty folder")
            continue
        for path in sorted(tree.rglob("*")):
            if path.is_file() or path.is_symlink():
                source = reader.path(path)
                files.append(
                    GoldFile.model_validate(
                        {"path": "/" + path.relative_to(tree).as_posix(), "source": str(source)}
                    )
                )
        break
    if answer is None and not files:
        return None
    return GoldOutput(answer=answer, files=files)


def _collect_steps(config: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    """``[[verifier.collect]]`` of a task.toml: the commands Harbor runs before the verifier
    (the world's final snapshot is one)."""
    steps = (config.get("verifier") or {}).get("collect") or []
    if not isinstance(steps, list) or not all(isinstance(step, dict) for step in steps):
        raise _fail(f"{path}: [[verifier.collect]] must be an array of tables")
    return steps


def needs_world_files(task: Task) -> bool:
    """Whether ``task`` is graded from world files (the snapshot marker, or an expected output
    other than a final answer)."""
    extra = task.model_extra or {}
    if extra.get("needs_snapshot"):
        return True
    return bool(task.expected_output) and str(task.expected_output) not in FINAL_ANSWER_OUTPUTS


def collects_snapshot(task: Task) -> bool:
    """Whether ``task``'s task.toml has a collect step that leaves the world's final snapshot."""
    for step in (task.model_extra or {}).get("snapshot_collect") or []:
        if "snapshot" in str(step.get("command") or ""):
            return True
    return False


def _load_task(root: Path, reader: _Reader, folder: Path) -> tuple[Task, Path | None]:
    config = reader.toml(folder / "task.toml", "the Harbor task config")
    metadata = dict(config.get("metadata") or {})
    grading_path = folder / "tests" / "grading_config.json"
    grading = reader.json(grading_path, "the task's rubric")
    graded = dict(grading.get("metadata") or {})
    task_id = metadata.get("task_id") or graded.get("task_id")
    world_id = metadata.get("world_id") or graded.get("world_id")
    if not task_id or not world_id:
        raise _fail(f"{folder / 'task.toml'}: [metadata] needs task_id and world_id (an APEX task's ids)")
    task_section = dict(config.get("task") or {})
    record = {
        "task_id": task_id,
        "task_name": graded.get("task_name") or task_section.get("name") or folder.name,
        "domain": metadata.get("domain") or graded.get("domain") or "",
        "world_id": world_id,
        "prompt": strip_preamble(reader.text(folder / "instruction.md", "the task's instruction")),
        "expected_output": (metadata.get("expected_output") or graded.get("expected_output")) or None,
        "rubric": criteria_from_config(grading_path, grading),
        "harbor_task_dir": folder.relative_to(root).as_posix(),
        "harbor_task": config,
        "grading_settings": grading.get("grading_settings"),
        "needs_snapshot": reader.exists(folder / "tests" / "needs_snapshot"),
        "snapshot_collect": _collect_steps(config, folder / "task.toml"),
    }
    try:
        task = Task.model_validate(record)
    except ValidationError as exc:
        raise _fail(f"{folder}: task {task_id!r}: {describe_validation(exc)}") from None
    gold = _gold(root, reader, folder / "tests", task_id)
    if gold is not None:
        task = task.model_copy(update={"gold_output": gold})
    overlay = folder / "environment" / "task_files"
    return task, overlay if overlay.is_dir() else None


def _inspect_seed(reader: _Reader, path: Path, *, verify: bool) -> int:
    """Member count of a seed archive; raises AtollError for an unsafe or corrupt one."""
    from atoll.loader import check_member_name

    files = 0
    try:
        with tarfile.open(reader.path(path), "r:gz") as archive:
            for member in archive:
                problem = check_member_name(member.name)
                if problem is None and not (member.isfile() or member.isdir()):
                    problem = "is not a regular file or directory"
                if problem:
                    raise _fail(f"{path}: member {member.name!r} {problem}")
                if member.isfile():
                    files += 1
                    if verify:
                        extracted = archive.extractfile(member)
                        while extracted is not None and extracted.read(1 << 20):
                            pass
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise _fail(f"{path}: corrupt or unreadable tar.gz ({exc})") from None
    return files


def seed_file_counts(seeds: dict[str, str]) -> dict[str, int]:
    """Files per subsystem of a v1.1 world's seed archives (for summaries)."""
    counts = dict.fromkeys(SEED_ARCHIVES, 0)
    for subsystem, path in seeds.items():
        with tarfile.open(path, "r:gz") as archive:
            counts[subsystem] = sum(member.isfile() for member in archive)
    return counts


def _world(root: Path, reader: _Reader, world_id: str, *, verify: bool) -> tuple[World, dict[str, str], int]:
    folder = root / "worlds" / world_id
    if not folder.is_dir():
        raise _fail(f"{folder}: missing (world {world_id!r} of a task has no worlds/<world_id>/ folder)")
    record: dict[str, Any] = {"world_id": world_id, "world_name": world_id}
    for name in WORLD_METADATA_FILES:
        if reader.exists(folder / name):
            metadata = reader.json(folder / name, "world metadata")
            if isinstance(metadata, dict):
                record.update({k: v for k, v in metadata.items() if v is not None})
            break
    if reader.exists(folder / "mcp_config.json"):
        config = reader.json(folder / "mcp_config.json", "the world's MCP servers")
        servers = (config or {}).get("mcpServers")
        if not isinstance(servers, dict):
            raise _fail(f"{folder / 'mcp_config.json'}: expected an object with 'mcpServers'")
        record["mcp_config"] = config
        record.setdefault("apps", [{"service_name": name} for name in servers])
    seeds = {}
    market_files = 0
    for subsystem, name in SEED_ARCHIVES.items():
        path = folder / name
        if reader.exists(path):
            _inspect_seed(reader, path, verify=verify)
            seeds[subsystem] = str(reader.path(path))
            if subsystem == ".apps_data":
                with tarfile.open(seeds[subsystem], "r:gz") as archive:
                    market_files = sum(
                        member.isfile() and member.name.lstrip("./").startswith("market_data/")
                        for member in archive
                    )
    if "filesystem" not in seeds:
        raise _fail(f"{folder}: filesystem.tar.gz missing (a world needs its files)")
    try:
        return World.model_validate(record), seeds, market_files
    except ValidationError as exc:
        raise _fail(f"{folder}: {describe_validation(exc)}") from None


def _seed_personas(path: str) -> list[PersonaSummary]:
    """The personas a world's ``.apps_data`` seed holds (``coworkers/personas.json``), as the
    listing shows them; AtollError(bad_benchmark) naming the seed when the file is invalid."""
    with tarfile.open(path, "r:gz") as archive:
        for member in archive:
            if member.isfile() and member.name.lstrip("./") == PERSONAS_FILE:
                if member.size > MAX_PERSONAS_BYTES:
                    raise _fail(f"{path}: {member.name}: {member.size} bytes, more than {MAX_PERSONAS_BYTES}")
                data = archive.extractfile(member)
                try:
                    personas = parse_personas(data.read() if data else b"", source=f"{path}: {member.name}")
                except AtollError as exc:
                    raise _fail(exc.message) from None
                return [
                    PersonaSummary(name=p.name, email=p.email, role=p.role, channels=p.channels)
                    for p in personas
                ]
    return []


def load_harbor_benchmark(dataset: Path | LocalView, *, verify_archives: bool = False) -> Benchmark:
    """The v1.1 dataset (a folder, or its :func:`~atoll.hf_cache.local_view`) as a Benchmark
    (layout ``apex-v1.1``); raises AtollError naming the file and the part that cannot be mapped."""
    reader = _Reader(dataset if isinstance(dataset, LocalView) else local_view(dataset))
    root = reader.root
    folders = _task_dirs(root, reader)
    if not folders:
        raise _fail(f"{root}: no Harbor task folders (tasks/<name>/task.toml)")
    tasks: list[Task] = []
    overlays: dict[str, str] = {}
    seen: dict[str, Path] = {}
    for folder in folders:
        task, overlay = _load_task(root, reader, folder)
        if task.task_id in seen:
            raise _fail(f"{folder}: task_id {task.task_id!r} repeats that of {seen[task.task_id]}")
        seen[task.task_id] = folder
        verifier_ids = [c.verifier_id for c in task.rubric]
        if len(set(verifier_ids)) != len(verifier_ids):
            raise _fail(f"{folder}: task {task.task_id!r} repeats a verifier_id")
        tasks.append(task)
        if overlay is not None:
            overlays[task.task_id] = str(reader.view.plain_tree(overlay) if reader.view.in_cache else overlay)
    warnings = [
        f"task {task.task_id} ({(task.model_extra or {}).get('harbor_task_dir')}) is graded from world files but its "
        "task.toml has no [[verifier.collect]] step leaving the final snapshot: a Harbor verifier "
        "would see no final snapshot"
        for task in tasks
        if needs_world_files(task) and not collects_snapshot(task)
    ]
    worlds, world_seeds, unavailable = [], {}, {}
    personas: dict[str, list[PersonaSummary]] = {}
    for world_id in sorted({task.world_id for task in tasks}):
        world, seeds, market_files = _world(root, reader, world_id, verify=verify_archives)
        worlds.append(world)
        world_seeds[world_id] = seeds
        if ".apps_data" in seeds and (found := _seed_personas(seeds[".apps_data"])):
            personas[world_id] = found
        missing = unavailable_apps(world, market_data_files=market_files)
        if missing:
            unavailable[world_id] = missing
    return Benchmark(
        root=str(root),
        tasks=tasks,
        worlds=worlds,
        task_overlays=overlays,
        layout="apex-v1.1",
        world_seeds=world_seeds,
        unavailable_apps=unavailable,
        warnings=warnings,
        world_personas=personas,
    )
