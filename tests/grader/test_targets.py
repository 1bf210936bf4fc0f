"""Grading targets in the spellings users bring, and what each lets the judge see."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from atoll.benchmark import Criterion, Task
from atoll.errors import AtollError
from atoll.targets import ARCHIPELAGO_FILE_TYPES, parse_target
from atoll.testing.scripted_llm import ScriptedLLM
from grader import JudgeConfig, grade_trial
from grader.inputs import load_rubric
from tests.grader import factories as f

MET = {"content": json.dumps({"rationale": "shown", "verdict": "met"})}

# Archipelago's FileTypeCategory values and their extension lists, as its source states them.
ARCHIPELAGO = {
    "Final Answer Only (No Files)": None,
    "Word Documents (.docx, .doc, .odt)": ["docx", "doc", "odt"],
    "Text Files (.txt)": ["txt"],
    "PDF Documents (.pdf)": ["pdf"],
    "Spreadsheets (.xlsx, .xls, .xlsm, .ods)": ["xlsx", "xls", "xlsm", "ods"],
    "Presentations (.pptx, .ppt, .odp)": ["pptx", "ppt", "odp"],
    "Python Files (.py)": ["py"],
    "JavaScript/TypeScript (.js, .ts, .jsx, .tsx)": ["js", "ts", "jsx", "tsx"],
    "Markdown (.md)": ["md"],
    "JSON/YAML (.json, .yaml, .yml)": ["json", "yaml", "yml"],
    "Database Files (.db)": ["db"],
    "Images (.png, .jpg, .jpeg, .webp)": ["png", "jpg", "jpeg", "webp"],
    "All output (modified files and final message in console)": [],
    "Any File Type": [],
}


@pytest.mark.parametrize("value", sorted(ARCHIPELAGO))
def test_every_archipelago_expected_file_type_is_mapped(value):
    target = parse_target(value)
    extensions = ARCHIPELAGO[value]
    if extensions is None:
        assert target.kind == "final_answer"
    elif not extensions:
        assert target.kind == "all"
    else:
        assert (target.kind, target.wanted_types(), target.with_answer) == ("file_type", extensions, False)


def test_the_table_covers_exactly_archipelagos_values():
    assert set(ARCHIPELAGO) | {"any"} == set(ARCHIPELAGO_FILE_TYPES)


@pytest.mark.parametrize(
    ("spelling", "kind", "extra"),
    [
        ("Final answer", "final_answer", {}),
        ("final_answer", "final_answer", {}),
        ("all", "all", {}),
        ("App data", "app_data", {}),
        (".xlsx", "file_type", {"file_types": ["xlsx"]}),
        ("/Reports/memo.docx", "file", {"path": "/Reports/memo.docx"}),
        ({"kind": "file_type", "file_type": "pptx"}, "file_type", {"file_type": "pptx"}),
    ],
)
def test_plain_strings_and_objects(spelling, kind, extra):
    criterion = Criterion.model_validate({"verifier_id": "v1", "criteria": "x", "grading_target": spelling})
    assert criterion.grading_target.kind == kind
    for key, value in extra.items():
        assert getattr(criterion.grading_target, key) == value


def test_an_unknown_string_names_the_criterion():
    with pytest.raises(
        ValidationError, match="criterion 'ver_1': grading_target: grading target 'Spreadsheet'"
    ):
        Criterion.model_validate({"verifier_id": "ver_1", "criteria": "x", "grading_target": "Spreadsheet"})


def test_an_unknown_expected_file_type_in_verifiers_json_names_the_verifier(tmp_path):
    path = tmp_path / "verifiers.json"
    path.write_text(
        json.dumps(
            [{"verifier_id": "ver_9", "verifier_values": {"criteria": "x", "expected_file_type": "Sheets"}}]
        )
    )
    with pytest.raises(AtollError, match="criterion 'ver_9': expected_file_type: grading target 'Sheets'"):
        load_rubric(path)


async def _grade(world_pair, task: Task, answer: str = "Profit was 40."):
    before, after = world_pair
    with ScriptedLLM([MET] * len(task.rubric)) as llm:
        judge = JudgeConfig(model="openai/judge", api_base=llm.api_base, api_key="x", retry_wait_s=0.0)
        grade = await grade_trial(task, before, after, f.trajectory(answer), judge)
        prompts = [
            "\n".join(m["content"] for m in r["messages"] if isinstance(m.get("content"), str))
            for r in llm.requests
        ]
    return grade, prompts


async def test_verifiers_json_final_answer_only_hides_every_changed_file(world_pair, tmp_path):
    path = tmp_path / "verifiers.json"
    path.write_text(
        json.dumps(
            [
                {
                    "verifier_id": "ver_1",
                    "verifier_values": {
                        "criteria": "States profit of 40",
                        "expected_file_type": "Final Answer Only (No Files)",
                    },
                }
            ]
        )
    )
    task = Task(task_id="t1", world_id="w1", prompt="Report Q3.", rubric=load_rubric(path))
    grade, prompts = await _grade(world_pair, task)
    assert grade.criteria[0].evidence == ["final_answer"]
    assert "Profit was 40." in prompts[0]
    for changed in ("summary.xlsx", "model.xlsx", "deck.pptx", "summary.pdf"):
        assert changed not in prompts[0]


async def test_a_spreadsheet_category_shows_only_spreadsheets_and_no_answer(world_pair):
    task = f.task(
        [
            {
                "verifier_id": "v1",
                "criteria": "Has profit",
                "expected_file_type": "Spreadsheets (.xlsx, .xls, .xlsm, .ods)",
            }
        ]
    )
    grade, prompts = await _grade(world_pair, task)
    assert sorted(grade.criteria[0].evidence) == ["file:/Reports/model.xlsx", "file:/Reports/summary.xlsx"]
    assert "Profit was 40." not in prompts[0]


async def test_a_derived_sheet_target_shows_the_sheets_and_the_answer(world_pair):
    task = f.task([{"verifier_id": "v1", "criteria": "Has profit"}]).model_copy(
        update={"expected_output": "edit_existing_sheet"}
    )
    grade, prompts = await _grade(world_pair, task)
    evidence = grade.criteria[0].evidence
    assert "file:/Reports/model.xlsx" in evidence and "final_answer" in evidence
    assert not any(e.endswith((".pptx", ".pdf")) for e in evidence)
    assert "Profit was 40." in prompts[0]


async def test_a_derived_file_target_with_neither_file_nor_answer_is_not_met_unseen(tmp_path):
    before = f.write_snapshot(tmp_path / "b.tar.gz", {"filesystem/a.txt": "x"})
    task = f.task([{"verifier_id": "v1", "criteria": "Deck made"}]).model_copy(
        update={"expected_output": "make_new_slide_deck"}
    )
    with ScriptedLLM([]) as llm:
        judge = JudgeConfig(model="openai/judge", api_base=llm.api_base, api_key="x", retry_wait_s=0.0)
        grade = await grade_trial(task, before, before, f.trajectory(""), judge)
        assert llm.requests == []
    assert grade.criteria[0].verdict.value == "not_met"
    assert ".pptx" in grade.criteria[0].rationale and "no final answer" in grade.criteria[0].rationale
