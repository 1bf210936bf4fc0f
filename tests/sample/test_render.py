"""World files kept as data (atoll_sample/worlds/*.yaml) render through the file writers."""

from __future__ import annotations

import random

import pytest
import yaml

from atoll.errors import AtollError
from atoll_sample._tasks import TASKS, tasks_from_data
from atoll_sample._world import WorldDraft
from atoll_sample.people import PRIYA, TOMAS
from atoll_sample.render import WORLDS, render_files
from tests.sample.conftest import CONSULTING, DEAL

WORLD_OF = {"keystone_background": CONSULTING, "atlas_background": DEAL}  # data file -> its world


def _draft(tmp_path) -> WorldDraft:
    return WorldDraft("world_test", tmp_path, random.Random(0), PRIYA)


def test_every_listed_file_is_in_the_generated_world(worlds):
    assert sorted(path.stem for path in WORLDS.glob("*.yaml")) == sorted(WORLD_OF)
    for name, world_id in WORLD_OF.items():
        data = yaml.safe_load((WORLDS / f"{name}.yaml").read_text(encoding="utf-8"))
        filesystem = worlds[world_id] / "filesystem"
        assert [e["path"] for e in data["files"] if not (filesystem / e["path"].lstrip("/")).is_file()] == []


def test_a_person_field_is_filled_in_from_the_cast(tmp_path):
    data_file = tmp_path / "world.yaml"
    data_file.write_text(
        "files:\n"
        "  - {path: /roster.txt, kind: text, body: '{TOMAS.name} <{TOMAS.email}>'}\n"
        '  - {path: /raw.csv, kind: exact, body: "a,b\\n1,2\\n"}\n',
        encoding="utf-8",
    )
    draft = _draft(tmp_path / "world")
    render_files(draft, data_file)
    assert draft.fs("/roster.txt").read_text(encoding="utf-8") == f"{TOMAS['name']} <{TOMAS['email']}>\n"
    assert draft.fs("/raw.csv").read_bytes() == b"a,b\n1,2\n"


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        ("{path: /a.txt, kind: text, body: '{NOBODY.name}'}", "{NOBODY.name}: NOBODY is no person"),
        ("{path: /a.odt, kind: odt, body: x}", "/a.odt has unknown kind 'odt'"),
    ],
    ids=["unknown-person", "unknown-kind"],
)
def test_a_mistake_in_a_data_file_is_one_line_naming_it(tmp_path, entry, named):
    data_file = tmp_path / "world.yaml"
    data_file.write_text(f"files:\n  - {entry}\n", encoding="utf-8")
    with pytest.raises(AtollError) as raised:
        render_files(_draft(tmp_path / "world"), data_file)
    assert named in raised.value.message and "\n" not in raised.value.message


def test_every_task_data_file_is_in_the_generated_benchmark(tasks):
    for data_file in sorted(TASKS.glob("*.yaml")):
        stated = [
            entry["task_id"] for entry in yaml.safe_load(data_file.read_text(encoding="utf-8"))["tasks"]
        ]
        assert [task_id for task_id in stated if task_id not in tasks] == [], data_file.name


def test_a_task_takes_its_values_whole_or_formatted(tmp_path, monkeypatch):
    (tmp_path / "made_up.yaml").write_text(
        "domain: Law\n"
        "tasks:\n"
        "  - task_id: t-1\n"
        "    name: A made-up task\n"
        "    output: message_in_console\n"
        "    prompt: 'What is {{x}}? About {x:.1f}.'\n"
        "    rubric:\n"
        "      - criteria: 'x is {x:,.2f}'\n"
        "        grading_target: {kind: final_answer}\n"
        "        check: {kind: answer_number, value: '{x}', tolerance: 0.5}\n"
        "    steps: [{tool: code_exec, arguments: {lines: '{lines}'}}]\n"
        "    final_answer: 'x is {x}.'\n",
        encoding="utf-8",
    )
    monkeypatch.setattr("atoll_sample._tasks.TASKS", tmp_path)
    [task] = tasks_from_data("made_up", "world_test", tmp_path, {"t-1": {"x": 1234.5, "lines": ["a", "b"]}})
    assert (task.prompt, task.domain, task.rubric[0].criteria) == (
        "What is {x}? About 1234.5.",
        "Law",
        "x is 1,234.50",
    )
    assert (task.rubric[0].verifier_id, task.rubric[0].check.value) == ("t-1-c1", 1234.5)
    assert task.reference_solution.steps[0].arguments == {"lines": ["a", "b"]}
    with pytest.raises(AtollError, match="made_up.yaml: task t-1 uses 'lines' with no value"):
        tasks_from_data("made_up", "world_test", tmp_path, {"t-1": {"x": 1}})
