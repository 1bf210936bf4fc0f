"""The viewer's pages in a real headless Chromium (Debian's /usr/bin/chromium, driven by
Playwright; no browser download): run page, trial table filter, a failed trial's transcript,
verdict rationale and sheet cell change — and the agent's HTML never runs; two runs compared.

ATOLL_VIEWER_SCREENSHOTS=DIR also writes the screenshots there (docs/images is made that way).
"""

import os
import shutil
import time
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from atoll.judge import CHECKS_ONLY_IDENTITY

pytestmark = pytest.mark.slow
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def page(tmp_path):
    assert Path(CHROMIUM).exists(), "Debian's chromium is missing: scripts/setup.sh --dev installs it"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.errors = []
        page.on("pageerror", lambda error: page.errors.append(str(error)))
        yield page
        browser.close()


def _shot(page, tmp_path, name):
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    assert path.stat().st_size > 5000
    if os.environ.get("ATOLL_VIEWER_SCREENSHOTS"):
        shutil.copy(path, Path(os.environ["ATOLL_VIEWER_SCREENSHOTS"]) / f"viewer-{name}.png")


def test_run_page_filter_then_a_failed_trial_with_its_transcript_verdicts_and_cell_change(
    page, viewer_url, finished_run, tmp_path
):
    started = time.monotonic()
    page.goto(viewer_url + "/")
    page.wait_for_selector("#runs-table tr[data-run='viewdemo']")
    _shot(page, tmp_path, "runs")
    page.click("#runs-table a:text('viewdemo')")

    rows = page.locator("#trial-table tbody tr")
    rows.first.wait_for()
    assert rows.count() == 2
    # The run is labelled with the judge recorded for its gradings (here none: checks only).
    assert page.locator("#run-judge").inner_text() == f"{CHECKS_ONLY_IDENTITY.describe()} · uncalibrated"
    assert page.locator("#leaderboard").inner_text().count("oracle") == 1
    assert page.locator(f"#matrix td.cell[data-task='{finished_run.failing}']").inner_text() == "0/1"
    assert "criteria not met" in page.locator("#failures").inner_text()
    assert page.locator("#failures a[href^='/trials/']").inner_text() == f"{finished_run.failing} / oracle #0"
    _shot(page, tmp_path, "run")

    page.select_option("#filter-outcome", "fail")
    assert rows.count() == 1 and rows.first.get_attribute("data-outcome") == "fail"
    page.select_option("#filter-outcome", "")
    page.fill("#search", "packaging")
    assert rows.count() == 1 and finished_run.passing in rows.first.inner_text()
    page.fill("#search", "")
    page.locator(f"#matrix td.cell[data-task='{finished_run.failing}']").click()  # the matrix filters too
    assert rows.count() == 1 and finished_run.failing in rows.first.inner_text()
    page.click("#trial-table th[data-key='task_id']")  # sorting keeps working on the filtered table
    assert rows.count() == 1

    rows.first.locator("a").click()
    page.wait_for_selector("#transcript .step")
    assert page.locator("#trial-judge").inner_text() == CHECKS_ONLY_IDENTITY.describe()
    assert "Dmitri emailed revised category savings targets" in page.locator("#prompt").inner_text()
    transcript = page.locator("#transcript").inner_text()
    assert "spreadsheets_edit_spreadsheet" in transcript and '"cell": "B6"' in transcript
    criterion = page.locator("#criteria .criterion[data-verifier$='-c2']")
    assert "not_met" in criterion.inner_text() and "decided by check" in criterion.inner_text()
    assert "expected 0.08" in criterion.locator(".rationale").inner_text()
    change = page.locator("#world-diff tr.cell-change[data-cell='B6'][data-sheet*='Assumptions']")
    assert change.count() == 1 and change.locator("td.after").inner_text() == "0.07"
    # Only the edited cells are listed; the formulas that kept their formula are a count.
    assert page.locator("#world-diff tr.cell-change").count() == 4
    unchanged = page.locator("#world-diff details.formulas-unchanged")
    assert unchanged.locator("summary").inner_text().startswith("21 formula cells kept their formula")
    assert not unchanged.locator("tr.formula-cell").first.is_visible()  # folded until asked

    # The agent's answer is shown as text: no element was injected, no script ran.
    assert page.locator("#final-answer").inner_text() == finished_run.hostile_answer
    assert page.locator("#final-answer script, #final-answer img").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert page.errors == []
    page.locator("#criteria").evaluate("node => node.previousElementSibling.scrollIntoView()")
    _shot(page, tmp_path, "trial")
    assert time.monotonic() - started < 120


def test_a_stopped_run_page_opens_with_its_banner(page, stopped_run, tmp_path):
    from .conftest import STOP_DETAIL, STOPPED_RUN, serve

    with serve(stopped_run) as url:
        page.goto(f"{url}/runs/{STOPPED_RUN}")
        banner = page.locator("#run-banner").inner_text()
        assert banner.startswith("ABORTED") and STOP_DETAIL in banner and "1 trial(s) not finished" in banner
        assert page.locator("#run-banner + #run-summary").count() == 1  # first, above the summary
        assert page.errors == []


def test_an_unknown_run_page_says_so_and_names_the_runs_known(page, viewer_url):
    page.goto(viewer_url + "/runs/missing-run")
    message = page.locator("#error").inner_text()
    assert "unknown_run" in message and "runs known: viewfixed, viewdemo" in message


def test_pick_two_runs_and_compare_them(page, viewer_url, finished_run, tmp_path):
    started = time.monotonic()
    page.goto(viewer_url + "/")
    page.wait_for_selector("#runs-table tr[data-run='viewdemo']")
    button = page.locator("#compare-button")
    page.check("#runs-table tr[data-run='viewdemo'] input.pick")
    assert button.is_disabled()  # one run picked is not a comparison
    page.check("#runs-table tr[data-run='viewfixed'] input.pick")
    assert button.is_enabled()
    button.click()

    page.wait_for_selector("#compare .compare-pair")
    assert page.url.endswith("/compare?a=viewfixed&b=viewdemo")  # in the runs page's order
    pair = page.locator(".compare-pair[data-agent='oracle']")
    failing = pair.locator(f"tr[data-task='{finished_run.failing}']")
    # Ungradeable in viewfixed (a judge-only criterion, no judge), failed in viewdemo.
    assert failing.get_attribute("data-change") == "not comparable"
    assert "0/0 (ungradeable)" in failing.inner_text() and "0/1 (fail)" in failing.inner_text()
    assert pair.locator("tr[data-metric='pass_at_1'] td.delta").inner_text() == "−50.0 pp"
    assert (
        "on 1 paired (task, run) outcomes: 0 passed only in viewfixed, 0 passed only in viewdemo; p = 1.000"
        in (pair.locator(".mcnemar").inner_text())
    )
    _shot(page, tmp_path, "compare")
    # Each task row links to its trials on both sides.
    for side, run in (("a", "viewfixed"), ("b", "viewdemo")):
        link = failing.locator(f"a.side-trial[data-side='{side}']")
        assert link.count() == 1 and link.get_attribute("href").endswith(f"?run={run}")
    assert page.locator(".compare-note").count() == 0  # both runs finished: nothing flagged
    passing = pair.locator(f"tr[data-task='{finished_run.passing}']")
    pair.locator("input.only-changed").check()  # unchanged tasks hide
    assert passing.is_hidden() and failing.is_visible()
    pair.locator("input.only-changed").uncheck()
    assert passing.is_visible()
    assert page.errors == []
    assert time.monotonic() - started < 120


@pytest.fixture
def judged_run(tmp_path):
    """The replay oracle on a task whose two criteria both have checks, judged by a judge that
    says not_met to everything (built before the browser starts its event loop): the store and
    the trial id."""
    import asyncio
    import json

    from atoll.experiment import ExperimentSpec
    from atoll.testing.scripted_llm import ScriptedLLM
    from orchestrator.runner import run_experiment
    from orchestrator.store import TrialStore
    from tests.shared_sample import fresh_sample_benchmark

    from .conftest import PASSING

    not_met = {"content": json.dumps({"rationale": "no baseline stated", "verdict": "not_met"})}
    with ScriptedLLM(lambda request: not_met) as judge:
        spec = ExperimentSpec.model_validate(
            {
                "name": "judged",
                "benchmark": str(fresh_sample_benchmark(tmp_path / "bench")),
                "tasks": {"ids": [PASSING]},
                "agents": [{"name": "oracle", "agent": "replay", "model": "replay"}],
                "judge": {"model": "openai/judge", "api_base": judge.api_base},
                "store": str(tmp_path / "atoll.db"),
                "artifacts": (tmp_path / "artifacts").as_uri(),
                "output_dir": str(tmp_path / "out"),
            }
        )
        asyncio.run(run_experiment(spec, quiet=True))
    store = TrialStore(spec.store)
    [(trial, _result, _state, _attempts)] = store.results("judged")
    yield store, trial.trial_id
    store.dispose()


def test_a_trial_page_says_who_decided_each_criterion_and_where_check_and_judge_disagree(judged_run, page):
    """A judge that says not_met to everything overrules two passing checks: the trial page says
    each was decided by the judge, that its check passed, and that the two disagree."""
    from .conftest import PASSING, serve

    store, trial_id = judged_run
    with serve(store) as url:
        page.goto(f"{url}/trials/{trial_id}?run=judged")
        page.wait_for_selector("#criteria .criterion")
        criterion = page.locator(f"#criteria .criterion[data-verifier='{PASSING}-c1']")
        assert criterion.get_attribute("data-agreement") == "disagree"
        decided = criterion.locator(".decided").inner_text()
        assert "decided by judge (openai/judge)" in decided and "check met, judge disagrees" in decided
        assert "2 check/judge disagreements" in page.locator("#trial-summary").inner_text()
        page.goto(f"{url}/runs/judged")  # and per agent on the run's leaderboard
        assert page.locator("#leaderboard td.disagreements").inner_text() == "2"
        assert page.errors == []


@pytest.fixture
def live_run(tmp_path):
    """A run in progress: t0 failed (criteria not met), t1 failed at max_steps, t2 running
    under a lease, t3 waiting; nothing stopped it."""
    from atoll.trial import Outcome, TrialResult
    from orchestrator.store import TrialStore

    from .conftest import enqueue_run

    store = TrialStore(str(tmp_path / "atoll.db"))
    specs = enqueue_run(store, "live", 4)
    by_id = {spec.trial_id: spec.task_id for spec in specs}
    leases = {
        by_id[lease.trial_id]: lease for lease in store.lease("w", limit=3, lease_s=600, experiment="live")
    }
    for task, end in (("t0", "completed"), ("t1", "max_steps")):
        lease = leases[task]
        store.complete(
            lease, "w", TrialResult(trial_id=lease.trial_id, outcome=Outcome.failed, run_status=end)
        )
    yield store, {task: spec.trial_id for spec, task in ((s, s.task_id) for s in specs)}
    store.dispose()


def test_a_running_run_shows_progress_and_each_failure_group_lists_exactly_its_trials(
    page, live_run, tmp_path
):
    from .conftest import serve

    store, ids = live_run
    with serve(store) as url:
        page.goto(f"{url}/runs/live")
        page.wait_for_selector("#trial-table tbody tr")
        assert page.locator("#run-banner").count() == 0  # running, not broken: no red banner
        assert "1 running, 1 waiting" in page.locator("#run-progress").inner_text()
        assert "null" not in page.locator("#main").inner_text()  # a spec without agent kinds or models
        failures = page.locator("#failures").inner_text()
        assert "t2" not in failures and "t3" not in failures  # not ended: not failures
        rows = page.locator("#trial-table tbody tr")
        assert rows.count() == 4

        page.click("#failures a.group-link:text('criteria not met')")
        shown = lambda: sorted(rows.evaluate_all("rows => rows.map((r) => r.dataset.trial)"))  # noqa: E731
        assert shown() == [ids["t0"]]  # not every failed trial: only this group's
        assert "group=reason" in page.url
        page.click("#failure-analysis [data-dimension='end_reason'] a.group-link:text('max_steps')")
        assert shown() == [ids["t1"]]
        page.click("#failure-analysis [data-dimension='outcome'] a.group-link")
        assert shown() == sorted([ids["t0"], ids["t1"]])

        page.click("#trial-table th[data-key='task_id']")  # sort descending, kept in the URL
        page.reload()
        page.wait_for_selector("#trial-table tbody tr")
        assert shown() == sorted([ids["t0"], ids["t1"]])
        assert rows.first.get_attribute("data-trial") == ids["t1"]  # still sorted descending
        page.click("#group-clear")
        assert rows.count() == 4 and "group=" not in page.url
        background = "getComputedStyle(document.body).backgroundColor"
        assert page.evaluate(background) == "rgb(255, 255, 255)"
        page.emulate_media(color_scheme="dark")  # the system's dark setting: a dark page
        assert page.evaluate(background) == "rgb(13, 17, 23)"
        page.evaluate("window.scrollTo(0, 0)")
        _shot(page, tmp_path, "run-live-dark")
        assert page.errors == []


def test_comparing_with_a_running_run_flags_it_and_its_pending_task(page, live_run):
    from atoll.trial import Outcome, TrialResult

    from .conftest import serve

    store, ids = live_run
    from .conftest import enqueue_run

    enqueue_run(store, "base", 4)
    for lease in store.lease("w", limit=4, lease_s=600, experiment="base"):
        store.complete(lease, "w", TrialResult(trial_id=lease.trial_id, outcome=Outcome.passed, score=1.0))
    with serve(store) as url:
        page.goto(f"{url}/compare?a=base&b=live")
        page.wait_for_selector("#compare .compare-pair")
        assert "run b (live) is not finished" in page.locator(".compare-note").inner_text()
        assert page.locator("#compare-summary dd[data-run='live'] .unfinished").count() == 1
        assert page.locator("#compare-summary dd[data-run='base'] .unfinished").count() == 0
        for task in ("t2", "t3"):  # one running, one waiting: neither is "only in a"
            row = page.locator(f"tr[data-task='{task}']")
            assert row.get_attribute("data-change") == "pending in b"
            link = row.locator("a.side-trial[data-side='b']")
            assert link.inner_text() in ("#0 leased", "#0 pending") and ids[task] in link.get_attribute(
                "href"
            )
        assert page.locator("tr[data-task='t0'] a.side-trial").count() == 2
        assert page.errors == []
