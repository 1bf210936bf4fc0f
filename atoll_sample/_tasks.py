"""Tasks kept as data (``atoll_sample/tasks/*.yaml``), filled in; and the gold files their
modules write (new files or edited copies).

A task data file lists ``tasks``, each the fields of :func:`make_task` (``rubric`` items are a
criterion's ``criteria``, ``grading_target`` and ``check``, numbered in order; ``steps`` are
``{tool, arguments}``, or one ``{name}`` naming a list of them; ``gold_files`` are ``{path,
description}`` of files its module wrote), with ``domain`` defaulting to the file's. What a task's module computes from the world is
filled in by name: a string that is one ``{name}`` is that value itself (a number, a list),
any other string is formatted (``{median:.1f}``, ``{{`` for a brace).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import docx
import openpyxl
from pptx import Presentation

from atoll.benchmark import Criterion, GoldFile, GoldOutput, ReferenceSolution, ReferenceStep, Task
from atoll.bounded_yaml import load_bounded_yaml
from atoll.errors import AtollError, ErrorCode
from atoll_sample._files import FROZEN_AT, normalize_ooxml

TASKS = Path(__file__).with_name("tasks")
_ONE_NAME = re.compile(r"\{(\w+)\}")


def tasks_from_data(
    name: str, world_id: str, benchmark_root: Path, values: Mapping[str, Mapping[str, Any]]
) -> list[Task]:
    """The tasks ``tasks/<name>.yaml`` states, each filled in with ``values[task_id]``. Raises
    AtollError ``bad_input`` naming the task and a name it uses that has no value."""
    path = TASKS / f"{name}.yaml"
    data = load_bounded_yaml(path.read_text(encoding="utf-8"), source=path.name, code=ErrorCode.bad_input)
    tasks = []
    for entry in data["tasks"]:
        task_id = entry["task_id"]
        try:
            task = fill(entry, values.get(task_id, {}))
        except KeyError as exc:
            raise AtollError(
                ErrorCode.bad_input, f"{path.name}: task {task_id} uses {exc} with no value"
            ) from None
        gold = GoldWriter(benchmark_root, task_id) if task.get("gold_files") else None
        tasks.append(
            make_task(
                task_id=task_id,
                name=task["name"],
                domain=task.get("domain", data.get("domain")),
                world_id=world_id,
                prompt=task["prompt"],
                output=task["output"],
                rubric=[
                    Criterion.model_validate({"verifier_id": f"{task_id}-c{number}", **item})
                    for number, item in enumerate(task["rubric"], start=1)
                ],
                steps=[
                    step(one["tool"], **one.get("arguments", {}))
                    for item in task["steps"]
                    for one in (item if isinstance(item, list) else [item])
                ],
                final_answer=task["final_answer"],
                answer=task.get("answer"),
                gold_files=[gold.describe(item["path"], item["description"]) for item in task["gold_files"]]
                if gold
                else None,
                input_files=task.get("input_files"),
            )
        )
    return tasks


def fill(value: Any, values: Mapping[str, Any], *, splice: bool = False) -> Any:
    """``value`` with ``values`` filled in by name, all through its lists and mappings (a string
    that is one ``{name}`` becomes that value; a mapping's keys are formatted). With ``splice``,
    a list item that is one ``{name}`` naming a list stands for that list's items. Raises
    KeyError naming a name with no value."""
    if isinstance(value, str):
        whole = _ONE_NAME.fullmatch(value)
        return values[whole[1]] if whole else value.format_map(values)
    if isinstance(value, list):
        filled = []
        for item in value:
            one = fill(item, values, splice=splice)
            if splice and isinstance(one, list) and isinstance(item, str):
                filled.extend(one)
            else:
                filled.append(one)
        return filled
    if isinstance(value, dict):
        return {
            key.format_map(values) if isinstance(key, str) else key: fill(item, values, splice=splice)
            for key, item in value.items()
        }
    return value


def step(tool: str, **arguments: Any) -> ReferenceStep:
    return ReferenceStep(tool=tool, arguments=arguments)


def make_task(
    *,
    task_id: str,
    name: str,
    domain: str,
    world_id: str,
    prompt: str,
    output: str,
    rubric: list[Criterion],
    steps: list[ReferenceStep],
    final_answer: str,
    answer: str | None = None,
    gold_files: list[GoldFile] | None = None,
    input_files: list[str] | None = None,
) -> Task:
    return Task(
        task_id=task_id,
        task_name=name,
        domain=domain,
        world_id=world_id,
        prompt=prompt,
        task_input_files=input_files,
        expected_output=output,
        rubric=rubric,
        gold_output=GoldOutput(answer=answer if answer is not None else final_answer, files=gold_files or []),
        reference_solution=ReferenceSolution(steps=steps, final_answer=final_answer),
    )


class GoldWriter:
    """Writes gold files where APEX-Agents v1 keeps them, ``<benchmark>/gold_files/<task_id>/
    filesystem/<world path>``, and describes them."""

    def __init__(self, benchmark_root: Path, task_id: str) -> None:
        self.root = benchmark_root
        self.folder = benchmark_root / "gold_files" / task_id / "filesystem"
        self.folder.mkdir(parents=True, exist_ok=True)

    def path(self, virtual_path: str) -> Path:
        target = self.folder / virtual_path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def describe(self, virtual_path: str, description: str) -> GoldFile:
        source = self.path(virtual_path).relative_to(self.root).as_posix()
        return GoldFile.model_validate({"path": virtual_path, "description": description, "source": source})

    def edited_copy(self, world_file: Path, virtual_path: str) -> Path:
        target = self.path(virtual_path)
        shutil.copyfile(world_file, target)
        return target


def set_cells(path: Path, sheet: str, values: dict[str, Any]) -> None:
    """Set cells of one sheet of the workbook at ``path`` in place (timestamps fixed)."""
    workbook = openpyxl.load_workbook(path)
    for cell, value in values.items():
        workbook[sheet][cell] = value
    workbook.properties.modified = FROZEN_AT
    workbook.save(path)
    normalize_ooxml(path)


def replace_paragraph(path: Path, index: int, text: str) -> None:
    """Replace the text of body paragraph ``index`` of the .docx at ``path`` in place."""
    document = docx.Document(str(path))
    paragraph = document.paragraphs[index]
    for run in paragraph.runs[1:]:
        run._r.getparent().remove(run._r)
    paragraph.runs[0].text = text
    document.core_properties.modified = FROZEN_AT
    document.save(str(path))
    normalize_ooxml(path)


def replace_in_deck(path: Path, replacements: dict[str, str]) -> None:
    """Replace text in every run of every slide of the .pptx at ``path`` in place."""
    deck = Presentation(str(path))
    for slide in deck.slides:
        for shape in slide.shapes:
            if not shape.has_text_frame:
                continue
            for paragraph in shape.text_frame.paragraphs:
                for run in paragraph.runs:
                    for old, new in replacements.items():
                        run.text = run.text.replace(old, new)
    deck.core_properties.modified = FROZEN_AT
    deck.save(str(path))
    normalize_ooxml(path)


def paragraph_index(path: Path, text: str) -> int:
    """The index of the body paragraph whose text is ``text`` (as ``body.p.{i}`` numbers them)."""
    for index, paragraph in enumerate(docx.Document(str(path)).paragraphs):
        if paragraph.text == text:
            return index
    raise ValueError(f"{path.name}: no paragraph reading {text!r}")
