import pytest

from atoll.trial import Outcome
from orchestrator.stats import (
    TrialRecord,
    benjamini_hochberg,
    bootstrap_mean,
    compute_metrics,
    mcnemar_exact,
    pass_at_k,
    pass_hat_k,
)

P, F, U, IE = Outcome.passed, Outcome.failed, Outcome.ungradeable, Outcome.infra_error


def _records(
    agent: str, outcomes_by_task: dict[str, list[Outcome]], domain: str = "Law"
) -> list[TrialRecord]:
    return [
        TrialRecord(
            agent=agent,
            task_id=task,
            run_index=run,
            outcome=outcome,
            domain=domain,
            score=1.0 if outcome is P else 0.25,
        )
        for task, outcomes in outcomes_by_task.items()
        for run, outcome in enumerate(outcomes)
    ]


def test_pass_at_k_hand_worked():
    # 5 runs, 2 passed, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)  # = c/n
    assert pass_at_k(8, 1, 8) == 1.0  # one pass among all 8 drawn
    assert pass_at_k(4, 4, 3) == 1.0 and pass_at_k(4, 0, 3) == 0.0


def test_pass_hat_k_hand_worked():
    # C(2,2)/C(5,2) = 1/10
    assert pass_hat_k(5, 2, 2) == pytest.approx(0.1)
    assert pass_hat_k(5, 2, 3) == 0.0  # cannot draw 3 passes out of 2
    assert pass_hat_k(8, 8, 8) == 1.0 and pass_hat_k(8, 7, 8) == 0.0


def test_k_above_n_is_rejected():
    with pytest.raises(ValueError, match="at least 3 graded runs"):
        pass_at_k(2, 1, 3)


def test_bootstrap_is_seeded_and_brackets_the_mean():
    values = [0.0, 1.0, 0.5, 1.0, 0.0, 0.25]
    first, second = bootstrap_mean(values, seed=7), bootstrap_mean(values, seed=7)
    assert (first.low, first.high) == (second.low, second.high)
    assert first.value == pytest.approx(0.4583333)
    assert first.low < first.value < first.high
    assert bootstrap_mean([1.0] * 5, seed=0).as_dict() == {
        "value": 1.0,
        "ci_low": 1.0,
        "ci_high": 1.0,
        "tasks": 5,
    }


def test_metrics_per_agent_with_exclusions_and_n_below_k():
    records = _records("a", {"t1": [P, P, F], "t2": [F, F, F], "t3": [P, U, IE]})
    metrics = compute_metrics(records, max_k=3, seed=1)["overall"]["a"]
    # t1: 2/3, t2: 0/3, t3: 1/1 -> Pass@1 = (2/3 + 0 + 1) / 3
    assert metrics["pass_at_1"]["value"] == pytest.approx((2 / 3 + 0 + 1) / 3)
    assert metrics["excluded_trials"] == {"infra_error": 1, "ungradeable": 1}
    assert metrics["trials_graded"] == 7 and metrics["trials_passed"] == 3
    # k=2: t3 has one graded run -> excluded; t1: 1 - C(1,2)/C(3,2) = 1, t2: 0
    assert metrics["pass_at_k"]["2"]["value"] == pytest.approx(0.5)
    assert metrics["pass_at_k"]["2"]["excluded_tasks"] == 1
    # Pass^2: t1: C(2,2)/C(3,2) = 1/3, t2: 0
    assert metrics["pass_hat_k"]["2"]["value"] == pytest.approx(1 / 6)
    assert metrics["pass_at_k"]["1"]["value"] == pytest.approx(metrics["pass_at_1"]["value"])
    # mean score: t1 (1+1+.25)/3, t2 .25, t3 1.0
    assert metrics["mean_score"]["value"] == pytest.approx(((2.25 / 3) + 0.25 + 1.0) / 3)


def test_all_pass_and_all_fail():
    records = _records("good", {"t1": [P, P], "t2": [P, P]}) + _records("bad", {"t1": [F, F], "t2": [F, F]})
    overall = compute_metrics(records, max_k=2)["overall"]
    assert overall["good"]["pass_hat_k"]["2"]["value"] == 1.0
    assert overall["good"]["pass_at_1"]["ci_low"] == 1.0
    assert overall["bad"]["pass_at_k"]["2"]["value"] == 0.0


def test_mcnemar_exact_hand_worked():
    assert mcnemar_exact(0, 6) == pytest.approx(2 * 0.5**6)
    assert mcnemar_exact(1, 5) == pytest.approx(2 * 7 / 64)
    assert mcnemar_exact(3, 3) == 1.0  # a tie
    assert mcnemar_exact(0, 0) == 1.0  # no discordant pairs


def test_benjamini_hochberg_hand_worked():
    q, reject = benjamini_hochberg([0.01, 0.04, 0.03, 0.2])
    assert q == pytest.approx([0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.2])
    assert reject == [True, False, False, False]


def test_pairwise_uses_paired_runs_only():
    records = (
        _records("a", {f"t{i}": [P] for i in range(8)})
        + _records("b", {f"t{i}": [F] for i in range(8)})
        + [TrialRecord("b", "t9", 0, P)]  # unpaired: a has no t9 run
    )
    (pair,) = compute_metrics(records, max_k=1)["pairwise"]
    assert (pair["pairs"], pair["a_only"], pair["b_only"]) == (8, 8, 0)
    assert pair["p_value"] == pytest.approx(2 * 0.5**8)
    assert pair["significant"] is True


def test_per_domain_split():
    records = _records("a", {"t1": [P]}, domain="Law") + _records(
        "a", {"t2": [F]}, domain="Investment Banking"
    )
    by_domain = compute_metrics(records, max_k=1)["by_domain"]
    assert by_domain["Law"]["a"]["pass_at_1"]["value"] == 1.0
    assert by_domain["Investment Banking"]["a"]["pass_at_1"]["value"] == 0.0


def test_a_repeated_agent_task_run_counts_once_in_every_metric():
    records = _records("a", {"t1": [P, F]}) + _records("b", {"t1": [F, F]})
    repeated = records + [TrialRecord("a", "t1", 1, P, score=1.0, domain="Law")]  # run 1 again, later
    metrics = compute_metrics(repeated, max_k=2)
    a = metrics["overall"]["a"]
    assert metrics["duplicates_dropped"] == 1
    assert a["trials_graded"] == 2 and a["trials_passed"] == 2  # the later record of run 1
    assert a["pass_hat_k"]["2"]["value"] == 1.0
    (pair,) = metrics["pairwise"]
    assert (pair["pairs"], pair["a_only"]) == (2, 2)


def test_pairwise_tests_per_domain_are_their_own_bh_family():
    law = _records("a", {f"t{i}": [P] for i in range(6)}) + _records("b", {f"t{i}": [F] for i in range(6)})
    banking = _records("a", {f"u{i}": [P] for i in range(2)}, domain="Banking") + _records(
        "b", {f"u{i}": [P] for i in range(2)}, domain="Banking"
    )
    metrics = compute_metrics(law + banking, max_k=1)
    (in_law,) = metrics["pairwise_by_domain"]["Law"]
    (in_banking,) = metrics["pairwise_by_domain"]["Banking"]
    assert (in_law["a_only"], in_law["p_value"]) == (6, pytest.approx(2 * 0.5**6))
    assert in_law["q_value"] == in_law["p_value"] and in_law["significant"]
    assert (in_banking["pairs"], in_banking["p_value"], in_banking["significant"]) == (2, 1.0, False)


def test_intervals_over_few_tasks_carry_a_warning_and_a_subset_series_uses_its_own_tasks():
    records = _records("a", {"t1": [P, P], "t2": [F, F], "t3": [P, U]})
    a = compute_metrics(records, max_k=2, seed=3)["overall"]["a"]
    assert "only 3 task(s)" in a["pass_at_1"]["warning"]
    at_2 = a["pass_at_k"]["2"]
    assert (at_2["tasks"], at_2["excluded_task_ids"], at_2["value"]) == (2, ["t3"], 0.5)
    assert 0.0 <= at_2["ci_low"] <= at_2["value"] <= at_2["ci_high"] <= 1.0


def test_mcnemar_exact_is_scipys_two_sided_binomial_test() -> None:
    # Computed without scipy (its import is most of a resumed run's CPU); must agree with it.
    from scipy.stats import binomtest

    from orchestrator.stats import mcnemar_exact

    for a_wins in range(0, 41):
        for b_wins in range(0, 41):
            if a_wins + b_wins == 0:
                assert mcnemar_exact(0, 0) == 1.0
                continue
            expected = binomtest(min(a_wins, b_wins), a_wins + b_wins, 0.5).pvalue
            assert mcnemar_exact(a_wins, b_wins) == pytest.approx(expected, rel=1e-12, abs=1e-300)
    for a_wins, b_wins in [(3, 480), (200, 260), (0, 1000)]:
        expected = binomtest(min(a_wins, b_wins), a_wins + b_wins, 0.5).pvalue
        assert mcnemar_exact(a_wins, b_wins) == pytest.approx(expected, rel=1e-9, abs=1e-300)
