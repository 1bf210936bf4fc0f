"""The real grader, given each task's gold world (gold files + replayed app steps + gold answer),
finds every checked criterion met: the checks and the gold outputs agree."""

from __future__ import annotations

import pytest

from atoll.loader import load_benchmark
from grader.gold import build_gold_world
from grader.grading import grade_trial_sync


@pytest.mark.slow
def test_gold_outputs_meet_every_check(sample_dir, tmp_path):
    benchmark = load_benchmark(sample_dir, verify_archives=True)
    assert len(benchmark.tasks) >= 12
    failures = []
    for task in benchmark.tasks:
        gold = build_gold_world(benchmark, task, tmp_path / task.task_id)
        grade = grade_trial_sync(task, gold.before, gold.after, gold.trajectory, None)
        checked = {c.verifier_id for c in task.rubric if c.check}
        assert checked
        failures += [
            f"{task.task_id} {v.verifier_id}: {v.verdict} ({v.rationale})"
            for v in grade.criteria
            if v.verifier_id in checked and v.verdict != "met"
        ]
    assert not failures, "\n".join(failures)
