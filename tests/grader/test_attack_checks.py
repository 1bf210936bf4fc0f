"""Catastrophic patterns against the grader (issue #26): a task's ``answer_regex`` pattern and
a check's file glob are the task author's (any published dataset, any ``/grade`` caller), the
text they run on is the agent's. A backtracking pattern held a grading thread for ever."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from atoll.benchmark import AnswerRegexCheck, FileExistsCheck
from grader.checks import run_check
from grader.diff import diff_snapshots
from grader.service import create_app
from grader.snapshot import Snapshot
from tests.grader import factories as f
from tests.served_app import ServedApp

BACKTRACKING = r"^(a|aa)+$"  # ~1.6**n steps on n "a" and a "!" with Python's re
ANSWER = "a" * 60 + "!"


def test_a_backtracking_answer_pattern_is_cut_short():
    started = time.monotonic()
    result = run_check(AnswerRegexCheck(pattern=BACKTRACKING), ANSWER, None)  # type: ignore[arg-type]
    assert time.monotonic() - started < 5
    assert result.passed is None and "took more than" in result.reason


def test_a_backtracking_file_glob_is_cut_short(tmp_path):
    """``/*a*a*…*b`` becomes ``[^/]*a[^/]*a…b``: polynomial of the pattern's degree in a long
    file name the agent chose."""
    before = f.write_snapshot(tmp_path / "b.tar.gz", {"filesystem/x.txt": "x"})
    after = f.write_snapshot(tmp_path / "a.tar.gz", {"filesystem/x.txt": "x", f"filesystem/{'a' * 200}": "y"})
    world = diff_snapshots(Snapshot(before), Snapshot(after))
    check = FileExistsCheck(file_type="", path="/" + "*a" * 14 + "*b", changed=False)
    started = time.monotonic()
    result = run_check(check, "", world)
    assert time.monotonic() - started < 5
    assert result.passed is not True  # no such file: answered (or, past 1 s, unevaluable)


@pytest.fixture
def grader_url():
    with ServedApp(create_app(None)) as served:  # checks only: no judge, no key
        yield served.url


def test_the_grading_service_answers_a_backtracking_task(grader_url, tmp_path):
    """Through ``POST /grade``: the grade comes back (the criterion unevaluable) instead of a
    thread spinning for as long as the pattern backtracks (with ``re``, minutes at 30
    characters, years at 60)."""
    task = f.task([{"verifier_id": "v1", "criteria": "c", "check": {"kind": "answer_regex", "pattern": BACKTRACKING}, "check_only": True}])  # fmt: skip
    before = f.write_snapshot(tmp_path / "b.tar.gz", {"filesystem/a.txt": "a"})
    after = f.write_snapshot(tmp_path / "a.tar.gz", {"filesystem/a.txt": "a"})
    with before.open("rb") as b, after.open("rb") as a:
        answer = httpx.post(
            f"{grader_url}/grade",
            data={"task": task.model_dump_json(), "trajectory": f.trajectory(ANSWER).model_dump_json()},
            files={"before": b, "after": a},
            timeout=20,
        )
    assert answer.status_code == 200, answer.text
    verdict = json.dumps(answer.json())
    assert "took more than" in verdict
    assert httpx.get(f"{grader_url}/health", timeout=1).status_code == 200


@pytest.mark.parametrize("field", ["task", "trajectory", "judge"])
def test_deeply_nested_json_fields_are_a_bad_request(grader_url, tmp_path, field):
    """``[[[[…]]]]`` in a form field made json's recursive parser raise RecursionError: a 500
    with a traceback in the log instead of one line naming the field."""
    snapshot = f.write_snapshot(tmp_path / "s.tar.gz", {"filesystem/a.txt": "a"})
    data = {"task": f.task([{"verifier_id": "v1", "criteria": "c"}]).model_dump_json()}
    data[field] = "[" * 200_000 + "]" * 200_000
    with snapshot.open("rb") as b, snapshot.open("rb") as a:
        answer = httpx.post(f"{grader_url}/grade", data=data, files={"before": b, "after": a}, timeout=20)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["message"] == f"field {field}: JSON nested too deeply"
