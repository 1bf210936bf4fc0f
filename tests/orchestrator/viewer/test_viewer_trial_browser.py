# ruff: noqa: F811  (the tests take the imported browser fixture `page` as an argument)
"""The trial page in a real headless Chromium: the verdict first, a 1,000-step transcript that
opens fast (outline, collapsed tool results, search, deep links, keys), no stray "null", and a
running trial whose steps appear as its trajectory so far grows.

ATOLL_VIEWER_SCREENSHOTS=DIR also writes the screenshots there (docs/images is made that way).
"""

import json
import re
import time
from datetime import UTC, datetime

import pytest

from atoll.grade import CriterionVerdict, Grade
from atoll.trajectory import ModelCall, Resume, RunStatus, ToolCall, Trajectory
from atoll.trial import Outcome, TrialResult, TrialSpec
from orchestrator.artifacts import ArtifactStore, claim_trial_folder
from orchestrator.executors.evidence import TRAJECTORY_NAME
from orchestrator.store import TrialStore

from .conftest import serve
from .test_viewer_browser import _shot, page  # noqa: F401  (the browser fixture)

pytestmark = pytest.mark.slow


def _prints_null(browser_page) -> bool:
    return re.search(r"\bnull\b", browser_page.locator("main").inner_text()) is not None


NEEDLE = "ZEBRA-4711"  # in one tool result only, deep in the transcript
NEEDLE_STEP = 777
ERROR_STEPS = (120, 640)


def _trajectory(steps: int, status: RunStatus) -> Trajectory:
    """A run of ``steps`` tool-calling steps; two tool calls fail; one result holds NEEDLE."""
    now = datetime.now(UTC)
    messages: list[dict] = [
        {"role": "system", "content": "You are a careful analyst."},
        {"role": "user", "content": "Reconcile the ledger in Finance/ledger.xlsx."},
    ]
    calls, model_calls = [], []
    for step in range(1, steps + 1):
        call_id = f"call_{step}"
        failed = step in ERROR_STEPS
        result = f"row {step}: " + ("amount 12.50; " * 80) + (NEEDLE if step == NEEDLE_STEP else "")
        name = "files_read" if step % 2 else "spreadsheets_read_range"
        arguments = {"path": f"Finance/part-{step}.csv"}
        messages.append(
            {
                "role": "assistant",
                "content": f"Reading part {step}.",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
        calls.append(
            ToolCall(
                id=call_id,
                step=step,
                name=name,
                arguments=arguments,
                result="error: no such file" if failed else result,
                is_error=failed,
            )
        )
        model_calls.append(ModelCall(step=step, model="m", duration_s=0.5))
    return Trajectory(
        agent="react",
        model="m",
        status=status,
        final_answer=None if status is RunStatus.running else "The ledger balances at 4,210.00.",
        messages=messages,
        tool_calls=calls,
        model_calls=model_calls,
        steps=steps,
        started_at=now,
        ended_at=now,
        resumes=[Resume(from_step=500, at=now, checkpoint_taken_at=now, elapsed_s=42.0, attempt=2)]
        if steps > 500
        else [],
    )


def _spec(experiment: str) -> TrialSpec:
    return TrialSpec(
        experiment=experiment,
        task_id="ledger-01",
        world_id="w",
        world_digest="d",
        agent_name="react",
        agent="react",
        model="m",
        run_index=0,
    )


@pytest.fixture
def long_trial(tmp_path):
    """A finished, failed 1,000-step trial: one criterion not met (decided by its check), one
    met. The store and the trial id."""
    store = TrialStore(str(tmp_path / "atoll.db"))
    store.save_experiment("long", {"name": "long", "benchmark": "b", "agents": [{"name": "react"}]})
    store.enqueue([_spec("long")])
    lease = store.lease("w", limit=1, lease_s=600)[0]
    trajectory = tmp_path / "trajectory.json"
    trajectory.write_text(_trajectory(1000, RunStatus.completed).model_dump_json())
    grade = Grade(
        task_id="ledger-01",
        trial_id=lease.trial_id,
        passed=False,
        score=0.5,
        criteria=[
            CriterionVerdict(
                verifier_id="ledger-01-c1",
                criterion="The total in Summary!B9 is 4,310.00",
                verdict="not_met",
                rationale="Summary!B9 holds 4,210.00, expected 4,310.00",
                decided_by="check",
                check_verdict="not_met",
                evidence=["file:filesystem/Finance/ledger.xlsx"],
            ),
            CriterionVerdict(
                verifier_id="ledger-01-c2",
                criterion="The answer states the total",
                verdict="met",
                rationale="it does",
                judge_model="openai/judge",
            ),
        ],
    )
    grade_path = tmp_path / "grade.json"
    grade_path.write_text(grade.model_dump_json())
    store.complete(
        lease,
        "w",
        TrialResult(
            trial_id=lease.trial_id,
            outcome=Outcome.failed,
            score=0.5,
            steps=1000,
            tool_calls=1000,
            trajectory_uri=trajectory.as_uri(),
            grade_uri=grade_path.as_uri(),
        ),
    )
    yield store, lease.trial_id
    store.dispose()


def test_a_failed_1000_step_trial_opens_fast_with_its_failed_criteria_first(long_trial, page, tmp_path):
    store, trial_id = long_trial
    with serve(store) as url:
        started = time.monotonic()
        page.goto(f"{url}/trials/{trial_id}?run=long")
        page.wait_for_selector("#step-1", state="visible")
        page.wait_for_selector("#outline a[data-step='1000']", state="attached")
        opened = time.monotonic() - started
        assert opened < 2.0, f"the 1,000-step trial took {opened:.2f} s to show its first step and outline"

        # Tool results stay out of the page until opened (only failed calls' are open).
        assert page.locator("#transcript pre.tool-result").count() <= len(ERROR_STEPS)

        # The verdict comes first: the failed criterion, who decided it, why, and its evidence.
        failed = page.locator("#failed-criteria .criterion#criterion-ledger-01-c1")
        assert "decided by check" in failed.inner_text()
        assert "expected 4,310.00" in failed.locator(".rationale").inner_text()
        assert failed.locator("a.evidence-link").inner_text() == "file:filesystem/Finance/ledger.xlsx"
        assert page.locator("#met-criteria .criterion#criterion-ledger-01-c2").is_hidden()  # collapsed
        tops = page.evaluate(
            "['#failed-criteria', '#final-answer', '#world-diff-section', '#transcript']"
            ".map((s) => document.querySelector(s).getBoundingClientRect().top)"
        )
        assert tops == sorted(tops), f"verdict, answer, world diff, transcript in that order: {tops}"
        assert page.locator("#trial-resumes").inner_text().startswith("resumed from a checkpoint at step 500")
        assert not _prints_null(page)
        _shot(page, tmp_path, "trial-verdict")

        # The outline names each step's tools and marks the failed ones.
        assert page.locator("#outline a.error").count() == len(ERROR_STEPS)
        assert "files_read" in page.locator("#outline a[data-step='1']").inner_text()

        # Search finds a string that is only in a collapsed tool result, and opens it.
        page.fill("#trial-search", NEEDLE.lower())
        assert page.locator("#search-count").inner_text() == "1 of 1 matches"
        hit = page.locator(f"#call-call_{NEEDLE_STEP}")
        assert hit.locator("details.tool-result-box").get_attribute("open") is not None
        assert NEEDLE in hit.locator("pre.tool-result").inner_text()
        assert hit.is_visible()
        page.locator("#trial-search").press("Escape")

        # Keys move from where the reader is (the search hit, step 777): p to the previous
        # failed step, j and k step by step, n to the next failed step.
        page.keyboard.press("p")
        assert page.url.endswith(f"#step-{ERROR_STEPS[1]}")
        page.keyboard.press("j")
        assert page.url.endswith(f"#step-{ERROR_STEPS[1] + 1}")
        page.keyboard.press("k")
        page.keyboard.press("p")
        assert page.url.endswith(f"#step-{ERROR_STEPS[0]}")
        page.keyboard.press("n")
        assert page.url.endswith(f"#step-{ERROR_STEPS[1]}")
        assert page.locator(f"#outline a.current[data-step='{ERROR_STEPS[1]}']").count() == 1
        _shot(page, tmp_path, "trial-transcript")

        # A deep link to a step far down scrolls to it; one to a criterion opens its section.
        page.goto(f"{url}/trials/{trial_id}?run=long#step-900")
        step = page.locator("#step-900")
        step.wait_for()
        page.wait_for_function("document.getElementById('step-900').getBoundingClientRect().top < 50")
        assert step.is_visible() and "targeted" in step.get_attribute("class")
        page.goto(f"{url}/trials/{trial_id}?run=long#criterion-ledger-01-c2")
        page.wait_for_selector("#criterion-ledger-01-c2", state="visible")
        page.goto(f"{url}/trials/{trial_id}?run=long#call-call_42")
        page.wait_for_selector("#call-call_42.targeted", state="visible")
        page.goto(f"{url}/trials/{trial_id}?run=long#step-%E0")  # a malformed link still opens the page
        page.wait_for_selector("#step-1", state="visible")
        assert page.errors == []


def test_no_page_prints_null_and_a_failed_criterion_links_to_its_evidence(
    page, viewer_url, finished_run, tmp_path
):
    """replaceChildren(null) writes "null": the trial pages and the empty store's page printed it."""
    from .conftest import serve as serve_store

    empty = TrialStore(str(tmp_path / "empty.db"))
    with serve_store(empty) as url:
        page.goto(url + "/")
        page.wait_for_selector("text=No runs in this store yet.")
        assert not _prints_null(page)
    empty.dispose()
    page.goto(viewer_url + "/runs/viewdemo")
    page.locator("#trial-table tbody tr").first.wait_for()
    links = page.eval_on_selector_all("#trial-table a[href^='/trials/']", "nodes => nodes.map((a) => a.href)")
    assert len(links) == 2
    for link in links:
        page.goto(link)
        page.wait_for_selector("#transcript .step")
        assert not _prints_null(page), link
    # The failed trial's criterion, decided by a check with no evidence ids, links to the world
    # diff, whose changed cell is then in view.
    page.goto(viewer_url + "/runs/viewdemo")
    page.locator("#trial-table tr[data-outcome='fail'] a").click()
    evidence = page.locator(
        "#failed-criteria .criterion[data-verifier$='-c2'] a.evidence-link:text('the world diff')"
    )
    evidence.click()
    page.wait_for_function(
        "Math.abs(document.getElementById('world-diff-section').getBoundingClientRect().top) < 5"
    )
    assert page.locator("#world-diff tr.cell-change[data-cell='B6']").first.is_visible()
    assert page.errors == []


def test_a_running_trial_shows_its_steps_as_they_come(page, tmp_path):
    artifacts = ArtifactStore((tmp_path / "artifacts").as_uri())
    store = TrialStore(str(tmp_path / "atoll.db"))
    store.save_experiment(
        "live", {"name": "live", "benchmark": "b", "agents": [{"name": "react"}], "artifacts": artifacts.url}
    )
    spec = _spec("live")
    store.enqueue([spec])
    lease = store.lease("w", limit=1, lease_s=600)[0]
    folder = claim_trial_folder(artifacts, spec, lease.attempt)

    def write(steps: int) -> None:
        artifacts.put_bytes(
            f"{folder}/{TRAJECTORY_NAME}", _trajectory(steps, RunStatus.running).model_dump_json().encode()
        )

    with serve(store) as url:
        page.goto(f"{url}/trials/{lease.trial_id}?run=live")
        # Nothing written yet: the page says where it looks (the run's artifacts).
        notice = page.locator("#trial-running")
        assert f"no trajectory so far in {artifacts.url} yet" in notice.inner_text()
        write(3)
        page.wait_for_selector("#step-3", timeout=15_000)
        assert page.locator("#transcript .step").count() == 3
        assert "3 steps so far" in page.locator("#trial-running").inner_text()
        page.locator("#step-2 details.tool-result-box summary").click()  # what the reader opened stays open
        write(7)
        page.wait_for_selector("#step-7", timeout=15_000)
        assert page.locator("#transcript .step").count() == 7
        assert page.locator("#outline a").count() == 7
        assert page.locator("#step-2 details.tool-result-box").get_attribute("open") is not None
        assert "7 steps so far" in page.locator("#trial-running").inner_text()
        assert not _prints_null(page)
        assert page.errors == []
    store.dispose()
