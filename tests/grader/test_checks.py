"""Every programmatic check, alone and before the judge."""

from __future__ import annotations

import json

import pytest

from atoll.benchmark import Criterion
from atoll.grade import UngradeableCode, Verdict
from atoll.testing.scripted_llm import ScriptedLLM
from grader import JudgeConfig, Snapshot, VerdictCache, diff_snapshots, grade_trial
from grader.checks import glob_regex, numbers_in, run_check
from tests.grader import factories as f
from tests.grader.conftest import AFTER, BEFORE


@pytest.fixture
def world(tmp_path):
    return diff_snapshots(
        Snapshot(f.write_snapshot(tmp_path / "b.tar.gz", BEFORE)),
        Snapshot(f.write_snapshot(tmp_path / "a.tar.gz", AFTER)),
    )


def check(spec: dict):
    return Criterion(verifier_id="v", criteria="c", check=spec).check


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Revenue was $1,234.50.", [1234.5]),
        ("margin 12%", [12.0, 0.12]),
        ("about 3.2k units and 1.5m users and 2bn", [3200.0, 3.2, 1_500_000.0, 1.5, 2_000_000_000.0, 2.0]),
        ("a loss of -42 or (17)", [-42.0, -17.0]),
        ("dated 2024-03-05", [2024.0, 3.0, 5.0]),
    ],
)
def test_numbers_are_normalised(text, expected):
    assert numbers_in(text) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("spec", "answer", "passed"),
    [
        ({"kind": "answer_number", "value": 1234.5}, "Total: $1,234.50", True),
        ({"kind": "answer_number", "value": 0.4}, "The margin is 40%", True),
        ({"kind": "answer_number", "value": 100, "tolerance": 0.5}, "about 100.4", True),
        ({"kind": "answer_number", "value": 100, "rel_tolerance": 0.01}, "it is 101.5", False),
        ({"kind": "answer_number", "value": 5}, "no numbers here", False),
        ({"kind": "answer_regex", "pattern": r"profit\s+of\s+40"}, "A PROFIT OF 40", True),
        ({"kind": "answer_regex", "pattern": "Profit", "case_sensitive": True}, "profit", False),
    ],
)
def test_answer_checks(world, spec, answer, passed):
    assert run_check(check(spec), answer, world).passed is passed


def test_invalid_regex_is_unevaluable_not_failed(world):
    assert run_check(check({"kind": "answer_regex", "pattern": "("}), "x", world).passed is None


@pytest.mark.parametrize(
    ("spec", "passed"),
    [
        (
            {
                "kind": "cell_value",
                "path": "/Reports/summary.xlsx",
                "sheet": "Summary",
                "cell": "B2",
                "value": 40,
            },
            True,
        ),
        (
            {
                "kind": "cell_value",
                "path": "/Reports/*.xlsx",
                "sheet": "summary",
                "cell": "A2",
                "value": " profit ",
            },
            True,
        ),
        (
            {"kind": "cell_value", "path": "/Reports/*.xlsx", "cell": "B3", "value": 0.41, "tolerance": 0.02},
            True,
        ),
        (
            {
                "kind": "cell_value",
                "path": "/Reports/summary.xlsx",
                "sheet": "Summary",
                "cell": "B2",
                "value": 41,
            },
            False,
        ),
        (
            {
                "kind": "cell_value",
                "path": "/Reports/summary.xlsx",
                "sheet": "Nope",
                "cell": "B2",
                "value": 40,
            },
            False,
        ),
        ({"kind": "cell_value", "path": "/Other/*.xlsx", "cell": "B2", "value": 40}, False),
    ],
)
def test_cell_value(world, spec, passed):
    assert run_check(check(spec), "", world).passed is passed


def test_cell_value_in_unreadable_workbook_is_unevaluable(tmp_path):
    world = diff_snapshots(
        Snapshot(f.write_snapshot(tmp_path / "b.tar.gz", {})),
        Snapshot(f.write_snapshot(tmp_path / "a.tar.gz", {"filesystem/x.xlsx": b"garbage"})),
    )
    result = run_check(check({"kind": "cell_value", "path": "**", "cell": "A1", "value": 1}), "", world)
    assert result.passed is None and "could not open" in result.reason


def test_cell_value_reads_dates_as_stored_and_names_a_bad_reference(tmp_path):
    import datetime

    book = f.xlsx({"S": [["Due", datetime.datetime(2025, 3, 31)]]})
    world = diff_snapshots(
        Snapshot(f.write_snapshot(tmp_path / "b.tar.gz", {})),
        Snapshot(f.write_snapshot(tmp_path / "a.tar.gz", {"filesystem/d.xlsx": book})),
    )
    found = run_check(
        check({"kind": "cell_value", "path": "**", "cell": "$B$1", "value": "2025-03-31 00:00:00"}), "", world
    )
    assert found.passed is True and "S!$B$1" in found.reason
    bad = run_check(check({"kind": "cell_value", "path": "**", "cell": "B", "value": 1}), "", world)
    assert bad.passed is None and "'B' is not a cell reference" in bad.reason


@pytest.mark.parametrize(
    ("spec", "passed"),
    [
        ({"kind": "file_exists", "file_type": "pptx"}, True),
        ({"kind": "file_exists", "file_type": ".PDF", "path": "/Reports/*", "contains": ["profit 40"]}, True),
        ({"kind": "file_exists", "file_type": "pdf", "contains": ["loss"]}, False),
        ({"kind": "file_exists", "file_type": "docx"}, False),  # exists, but unchanged
        ({"kind": "file_exists", "file_type": "docx", "changed": False}, True),
        ({"kind": "file_exists", "file_type": "csv", "path": "/Data/**", "changed": False}, True),
        ({"kind": "file_exists", "file_type": "xlsx", "path": "/*.xlsx"}, False),  # * stays within a folder
    ],
)
def test_file_exists(world, spec, passed):
    assert run_check(check(spec), "", world).passed is passed


def test_glob():
    assert glob_regex("/Reports/**/*.xlsx").match("/Reports/a.xlsx")
    assert glob_regex("Reports/**/*.xlsx").match("/Reports/q3/final/a.xlsx")
    assert not glob_regex("/Reports/*.xlsx").match("/Reports/q3/a.xlsx")


@pytest.mark.parametrize(
    ("spec", "passed"),
    [
        ({"kind": "email_sent", "to": ["boss@acme.com"]}, True),
        (
            {
                "kind": "email_sent",
                "to": ["BOSS@acme.com", "cfo@acme.com"],
                "subject_contains": "q3",
                "body_contains": ["profit", "margin"],
                "attachment_type": "pdf",
            },
            True,
        ),
        ({"kind": "email_sent", "to": ["ceo@acme.com"]}, False),
        ({"kind": "email_sent", "to": ["boss@acme.com"], "attachment_type": "xlsx"}, False),
        ({"kind": "email_sent", "to": ["boss@acme.com"], "body_contains": ["loss"]}, False),
    ],
)
def test_email_sent(world, spec, passed):
    assert run_check(check(spec), "", world).passed is passed


@pytest.mark.parametrize(
    ("spec", "passed"),
    [
        ({"kind": "event_created", "summary_contains": "review"}, True),
        (
            {
                "kind": "event_created",
                "summary_contains": "Q3",
                "date": "2025-03-04",
                "attendees": ["cfo@acme.com"],
            },
            True,
        ),
        ({"kind": "event_created", "summary_contains": "Q3", "date": "2025-03-05"}, False),
        ({"kind": "event_created", "summary_contains": "Standup"}, False),  # existed before
        ({"kind": "event_created", "summary_contains": "Q3", "attendees": ["ceo@acme.com"]}, False),
    ],
)
def test_event_created(world, spec, passed):
    assert run_check(check(spec), "", world).passed is passed


@pytest.mark.parametrize(
    ("spec", "passed"),
    [
        ({"kind": "chat_posted", "contains": ["Q3 summary"]}, True),
        ({"kind": "chat_posted", "channel": "finance", "contains": ["profit 40"]}, True),
        ({"kind": "chat_posted", "channel": "Space AAA"}, True),
        ({"kind": "chat_posted", "channel": "AAA"}, True),
        ({"kind": "chat_posted", "channel": "General"}, False),
        ({"kind": "chat_posted", "contains": ["loss"]}, False),
    ],
)
def test_chat_posted(world, spec, passed):
    assert run_check(check(spec), "", world).passed is passed


# --- checks inside grading -------------------------------------------------------------------

MET = {"content": json.dumps({"rationale": "fine", "verdict": "met"})}


async def test_checks_alone_without_a_judge(tmp_path):
    before, after = (
        f.write_snapshot(tmp_path / "b.tar.gz", BEFORE),
        f.write_snapshot(tmp_path / "a.tar.gz", AFTER),
    )
    task = f.task(
        [
            {"verifier_id": "n", "criteria": "profit 40", "check": {"kind": "answer_number", "value": 40}},
            {"verifier_id": "m", "criteria": "mail", "check": {"kind": "email_sent", "to": ["ceo@acme.com"]}},
            {"verifier_id": "j", "criteria": "quality of prose"},
        ]
    )
    grade = await grade_trial(task, before, after, f.trajectory("Profit: 40"), judge=None)
    by_id = {v.verifier_id: v for v in grade.criteria}
    assert (
        by_id["n"].verdict is Verdict.met
        and by_id["n"].decided_by == "check"
        and by_id["n"].judge_model is None
    )
    assert by_id["m"].verdict is Verdict.not_met and "check email_sent failed" in by_id["m"].rationale
    assert (
        by_id["j"].verdict is Verdict.ungradeable and "no judge configured" in by_id["j"].ungradeable_reason
    )
    assert by_id["j"].ungradeable_code is UngradeableCode.no_judge
    assert grade.score == pytest.approx(1 / 3) and grade.ungradeable == 1


async def test_an_ungradeable_criterion_names_why_as_a_code(world_pair, monkeypatch):
    """A check that cannot run and a grader bug each lead the grade's reason with their code
    (the trial's error kind, by which reports and the viewer group failures)."""
    before, after = world_pair
    task = f.task(
        [
            {
                "verifier_id": "p",
                "criteria": "pattern",
                "check": {"kind": "answer_regex", "pattern": "(unclosed"},
            }
        ]
    )
    grade = await grade_trial(task, before, after, f.trajectory("Profit: 40"), judge=None)
    assert grade.criteria[0].ungradeable_code is UngradeableCode.check_error
    assert grade.ungradeable_reasons == [f"p: check_error: {grade.criteria[0].ungradeable_reason}"]
    assert "invalid pattern" in grade.ungradeable_reasons[0]

    def broken_route(*args, **kwargs):
        raise RuntimeError("a bug in routing")

    monkeypatch.setattr("grader.grading.route", broken_route)
    judged = f.task([{"verifier_id": "q", "criteria": "quality of prose"}])
    with ScriptedLLM([MET]) as llm:
        grade = await grade_trial(
            judged,
            before,
            after,
            f.trajectory("Profit: 40"),
            JudgeConfig(model="openai/j", api_base=llm.api_base, api_key="x"),
        )
    assert grade.criteria[0].ungradeable_code is UngradeableCode.grader_error
    assert grade.ungradeable_reasons == ["q: grader_error: grader error: RuntimeError: a bug in routing"]


async def test_check_before_the_judge(tmp_path):
    before, after = (
        f.write_snapshot(tmp_path / "b.tar.gz", BEFORE),
        f.write_snapshot(tmp_path / "a.tar.gz", AFTER),
    )
    task = f.task(
        [
            {
                "verifier_id": "pass",
                "criteria": "deck on Q3",
                "check": {"kind": "file_exists", "file_type": "pptx"},
            },
            {
                "verifier_id": "fail",
                "criteria": "doc memo",
                "check": {"kind": "file_exists", "file_type": "docx"},
            },
            {
                "verifier_id": "only",
                "criteria": "sheet",
                "check": {"kind": "file_exists", "file_type": "xlsx"},
                "check_only": True,
            },
        ]
    )
    with ScriptedLLM([MET]) as llm:
        judge = JudgeConfig(model="openai/j", api_base=llm.api_base, api_key="x")
        grade = await grade_trial(task, before, after, f.trajectory("done"), judge)
        assert len(llm.requests) == 1  # only the criterion whose check passed and is not check_only
        assert "deck on Q3" in llm.requests[0]["messages"][-1]["content"]
    by_id = {v.verifier_id: v for v in grade.criteria}
    assert by_id["pass"].decided_by == "judge" and by_id["pass"].verdict is Verdict.met
    assert by_id["pass"].rationale.startswith("check file_exists passed")
    assert by_id["fail"].decided_by == "check" and by_id["fail"].verdict is Verdict.not_met
    assert by_id["only"].decided_by == "check" and by_id["only"].verdict is Verdict.met


NOT_MET = {"content": json.dumps({"rationale": "the deck is about Q2", "verdict": "not_met"})}


async def test_the_checks_own_verdict_is_recorded_whoever_decides(tmp_path):
    """A judge that says not_met to everything decides the criteria it is asked about, but each
    keeps its check's own verdict, and where both spoke whether they agree; a cached verdict
    too, and an ungradeable judge agrees with nothing."""
    before, after = (
        f.write_snapshot(tmp_path / "b.tar.gz", BEFORE),
        f.write_snapshot(tmp_path / "a.tar.gz", AFTER),
    )
    task = f.task(
        [
            {
                "verifier_id": "pass",
                "criteria": "deck",
                "check": {"kind": "file_exists", "file_type": "pptx"},
            },
            {
                "verifier_id": "fail",
                "criteria": "memo",
                "check": {"kind": "file_exists", "file_type": "docx"},
            },
            {
                "verifier_id": "only",
                "criteria": "sheet",
                "check": {"kind": "file_exists", "file_type": "xlsx"},
                "check_only": True,
            },
            {"verifier_id": "plain", "criteria": "prose quality"},
        ]
    )
    cache = VerdictCache(tmp_path / "verdicts.sqlite")
    with ScriptedLLM(lambda request: NOT_MET) as llm:
        judge = JudgeConfig(model="openai/j", api_base=llm.api_base, api_key="x")
        first = await grade_trial(task, before, after, f.trajectory("done"), judge, cache)
        again = await grade_trial(task, before, after, f.trajectory("done"), judge, cache)
    for grade in (first, again):
        by_id = {v.verifier_id: v for v in grade.criteria}
        assert (by_id["pass"].decided_by, by_id["pass"].verdict) == ("judge", Verdict.not_met)
        assert by_id["pass"].check_verdict is Verdict.met and by_id["pass"].check_agrees is False
        assert by_id["fail"].check_verdict is Verdict.not_met and by_id["fail"].check_agrees is None
        assert by_id["only"].check_verdict is Verdict.met and by_id["only"].check_agrees is None
        assert by_id["plain"].check_verdict is None and by_id["plain"].check_agrees is None
    assert {v.verifier_id for v in again.criteria if v.cached} == {"pass", "plain"}

    with ScriptedLLM(lambda request: {"status": 500}) as llm:
        judge = JudgeConfig(model="openai/j", api_base=llm.api_base, api_key="x", transient_retries=0)
        grade = await grade_trial(task, before, after, f.trajectory("done"), judge)
    silent = next(v for v in grade.criteria if v.verifier_id == "pass")
    assert silent.verdict is Verdict.ungradeable and silent.decided_by == "judge"
    assert silent.check_verdict is Verdict.met and silent.check_agrees is None


async def test_a_grader_error_after_a_passing_check_keeps_the_checks_verdict(tmp_path, monkeypatch):
    # A failure in the judge path (here routing the evidence) made the criterion ungradeable and
    # lost the check's own verdict, so "Checks pass" moved with the judge path.
    from grader import grading

    def broken(*args, **kwargs):
        raise RuntimeError("an extractor bug")

    monkeypatch.setattr(grading, "route", broken)
    before, after = (
        f.write_snapshot(tmp_path / "b.tar.gz", BEFORE),
        f.write_snapshot(tmp_path / "a.tar.gz", AFTER),
    )
    task = f.task(
        [
            {
                "verifier_id": "pass",
                "criteria": "deck",
                "check": {"kind": "file_exists", "file_type": "pptx"},
            },
            {"verifier_id": "plain", "criteria": "prose quality"},
        ]
    )
    with ScriptedLLM(lambda request: NOT_MET) as llm:
        judge = JudgeConfig(model="openai/j", api_base=llm.api_base, api_key="x")
        grade = await grade_trial(task, before, after, f.trajectory("done"), judge)
        assert llm.requests == []
    by_id = {v.verifier_id: v for v in grade.criteria}
    assert by_id["pass"].verdict is Verdict.ungradeable and "an extractor bug" in by_id["pass"].rationale
    assert by_id["pass"].check_verdict is Verdict.met and by_id["pass"].check_agrees is None
    assert by_id["plain"].check_verdict is None
