"""Gold outputs of the sample benchmark pass every programmatic check."""

from __future__ import annotations

import pytest

from atoll.grade import Verdict
from atoll.loader import load_benchmark
from grader import grade_trial
from grader.gold import build_gold_world
from tests.shared_sample import fresh_sample_benchmark


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return load_benchmark(fresh_sample_benchmark(tmp_path_factory.mktemp("sample")))


@pytest.mark.slow
async def test_gold_outputs_pass_every_programmatic_check(sample, tmp_path):
    checked = 0
    kinds: set[str] = set()
    for task in sample.tasks:
        gold = build_gold_world(sample, task, tmp_path / task.task_id)
        grade = await grade_trial(task, gold.before, gold.after, gold.trajectory, judge=None)
        for criterion, verdict in zip(task.rubric, grade.criteria, strict=True):
            if criterion.check is None:
                assert verdict.verdict is Verdict.ungradeable  # no judge in this test
                continue
            assert verdict.verdict is Verdict.met, (
                f"{task.task_id} {criterion.verifier_id}: {verdict.rationale}"
            )
            checked += 1
            kinds.add(criterion.check.kind)
    # the sample exercises every kind of check, mail/event/chat through replayed reference steps
    assert kinds == {
        "answer_number",
        "answer_regex",
        "cell_value",
        "file_exists",
        "email_sent",
        "event_created",
        "chat_posted",
        "coworker_contacted",  # the gold world records the reference mail to Margaret as the engine would
    }
    assert checked >= 30


async def test_an_empty_attempt_fails_the_checks(sample, tmp_path):
    task = sample.task("keystone-07-headcount-email")
    gold = build_gold_world(sample, task, tmp_path)
    grade = await grade_trial(task, gold.before, gold.before, None, judge=None)
    assert [v.verdict for v in grade.criteria] == [Verdict.not_met] * 3 and not grade.passed
