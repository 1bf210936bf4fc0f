# ruff: noqa: F811  (the tests take the imported browser fixture `page` as an argument)
"""The world diff on the trial page, in a real headless Chromium: a real .docx edit (python-docx
opens the world's memo, rewrites one paragraph, inserts one and deletes one) shows only those
three paragraphs, and mails, calendar events and chat messages show field by field what was
added, removed or changed; and a trial that recorded its raw model calls (record_raw) shows
each step's request and response on demand, fetched only when opened.

ATOLL_VIEWER_SCREENSHOTS=DIR also writes the screenshot there (docs/images is made that way).
"""

import io
from datetime import UTC, datetime

import pytest

from atoll.trajectory import RAW_MODEL_CALLS_NAME, ModelCall, RunStatus, Trajectory, raw_lines
from atoll.trial import Outcome, TrialResult, TrialSpec
from orchestrator.store import TrialStore
from tests.grader import factories as f

from .conftest import serve
from .test_viewer_browser import _shot, page  # noqa: F401  (the browser fixture)

pytestmark = pytest.mark.slow

MEMO = "filesystem/Legal/memo.docx"
RAW_NEEDLE = "RAW-REQUEST-7f3e"
KEPT = [f"Clause {n}: the parties agree to term {n}." for n in range(1, 21)]
MAIL = ".apps_data/mail/Sent.mbox"
CALENDAR = ".apps_data/calendar/me@acme.com.ics"
CHAT = ".apps_data/chat/Google Chat/Groups/Space AAA/messages.json"


def _edited_memo(before: bytes) -> bytes:
    """The memo as an agent's document tool leaves it: clause 5 rewritten, a clause inserted
    after clause 10, clause 15 deleted, everything else untouched."""
    import docx as python_docx

    document = python_docx.Document(io.BytesIO(before))
    paragraphs = {p.text: p for p in document.paragraphs}
    paragraphs[KEPT[4]].text = "Clause 5: the parties agree to term 5, capped at $250,000."
    paragraphs[KEPT[10]].insert_paragraph_before("Clause 10a: fees are payable within 30 days.")
    removed = paragraphs[KEPT[14]]._element
    removed.getparent().remove(removed)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


@pytest.fixture
def edited_world(tmp_path):
    """A finished trial whose agent edited the memo, edited and sent mail, moved a meeting and
    edited a chat message. The store and the trial id."""
    memo = f.docx(KEPT)
    mail = {"from": "me@acme.com", "to": "ana@acme.com", "subject": "Memo", "id": "<m1@a>"}
    before = {
        MEMO: memo,
        MAIL: f.mbox([{**mail, "body": "Draft attached."}]),
        CALENDAR: f.ics(
            [{"uid": "e1", "summary": "Signing", "start": "20250303T100000Z", "end": "20250303T110000Z"}]
        ),
        CHAT: f.chat_messages([f.chat_message("Space AAA", "t1", "t1", "memo is in draft")]),
    }
    after = {
        MEMO: _edited_memo(memo),
        MAIL: f.mbox(
            [
                {**mail, "body": "Final attached."},
                {
                    "from": "me@acme.com",
                    "to": "bo@acme.com",
                    "subject": "Signing moved",
                    "body": "Now 2pm.",
                    "id": "<m2@a>",
                },
            ]
        ),
        CALENDAR: f.ics(
            [{"uid": "e1", "summary": "Signing", "start": "20250303T140000Z", "end": "20250303T150000Z"}]
        ),
        CHAT: f.chat_messages([f.chat_message("Space AAA", "t1", "t1", "memo is final")]),
    }
    store = TrialStore(str(tmp_path / "atoll.db"))
    store.save_experiment("docs", {"name": "docs", "benchmark": "b", "agents": [{"name": "react"}]})
    spec = TrialSpec(
        experiment="docs",
        task_id="memo-01",
        world_id="w",
        world_digest="d",
        agent_name="react",
        agent="react",
        model="m",
        run_index=0,
    )
    store.enqueue([spec])
    lease = store.lease("w", limit=1, lease_s=600)[0]
    now = datetime.now(UTC)
    trajectory = tmp_path / "trajectory.json"
    trajectory.write_text(
        Trajectory(
            agent="react",
            model="m",
            status=RunStatus.completed,
            final_answer="Memo updated.",
            messages=[
                {"role": "user", "content": "Update the memo."},
                {"role": "assistant", "content": "Done."},
            ],
            model_calls=[ModelCall(step=1, model="m", duration_s=0.4)],
            steps=1,
            started_at=now,
            ended_at=now,
        ).model_dump_json()
    )
    # Beside the trajectory, as store_artifacts writes it (tests/agents_runner/test_raw_recording.py
    # records it through litellm).
    (tmp_path / RAW_MODEL_CALLS_NAME).write_bytes(
        raw_lines(
            [
                {
                    "step": 1,
                    "retries": 0,
                    "request": {"model": "openai/m", "messages": [{"role": "user", "content": RAW_NEEDLE}]},
                    "response": {"choices": [{"message": {"role": "assistant", "content": "Done."}}]},
                    "error": None,
                }
            ]
        )
    )
    store.complete(
        lease,
        "w",
        TrialResult(
            trial_id=lease.trial_id,
            outcome=Outcome.passed,
            score=1.0,
            steps=1,
            trajectory_uri=trajectory.as_uri(),
            snapshot_before_uri=f.write_snapshot(tmp_path / "before.tar.gz", before).as_uri(),
            snapshot_after_uri=f.write_snapshot(tmp_path / "after.tar.gz", after).as_uri(),
        ),
    )
    yield store, lease.trial_id
    store.dispose()


def test_a_docx_edit_shows_only_the_changed_paragraphs_records_field_by_field_and_raw_calls_on_demand(
    edited_world, page, tmp_path
):
    store, trial_id = edited_world
    with serve(store) as url:
        page.goto(f"{url}/trials/{trial_id}?run=docs")
        memo = page.locator("#world-diff .file-change[data-path='/Legal/memo.docx']")
        memo.wait_for()
        changes = memo.locator(".line-change")
        shown = [
            (
                node.get_attribute("data-change"),
                node.locator("del").all_inner_texts(),
                node.locator("ins").all_inner_texts(),
            )
            for node in changes.all()
        ]
        assert sorted(shown) == sorted(
            [
                ("changed", [KEPT[4]], ["Clause 5: the parties agree to term 5, capped at $250,000."]),
                ("added", [], ["Clause 10a: fees are payable within 30 days."]),
                ("removed", [KEPT[14]], []),
            ]
        ), shown
        # No unchanged paragraph is listed as a change.
        listed = memo.locator(".line-changes").inner_text()
        assert all(text not in listed for n, text in enumerate(KEPT) if n not in (4, 14))

        def fields(kind, action):
            box = page.locator(f"#world-diff .record[data-kind='{kind}']").filter(has_text=f"{kind} {action}")
            assert box.count() == 1, (kind, action)
            return {
                row.get_attribute("data-field"): [cell.inner_text() for cell in row.locator("td").all()[1:]]
                for row in box.locator("tr.field-change").all()
            }

        # The edited mail lists only its body, before and after; the sent one every field it has.
        assert fields("mail", "edited") == {"body": ["Draft attached.", "Final attached."]}
        assert fields("mail", "sent") == {
            "from": ["me@acme.com"],
            "to": ["bo@acme.com"],
            "subject": ["Signing moved"],
            "body": ["Now 2pm."],
        }
        assert fields("event", "updated") == {
            "start": ["2025-03-03T10:00:00+00:00", "2025-03-03T14:00:00+00:00"],
            "end": ["2025-03-03T11:00:00+00:00", "2025-03-03T15:00:00+00:00"],
        }
        assert fields("chat", "edited") == {"text": ["memo is in draft", "memo is final"]}
        page.locator("#world-diff-section").scroll_into_view_if_needed()
        memo.scroll_into_view_if_needed()
        _shot(page, tmp_path, "trial-world-diff")

        # The raw request and response: collapsed, and not fetched until opened.
        fetched = []
        page.on("request", lambda request: fetched.append(request.url) if "/raw/" in request.url else None)
        box = page.locator("#step-1 details.raw-box")
        assert box.get_attribute("open") is None and RAW_NEEDLE not in page.content()
        box.locator("summary").click()
        page.wait_for_selector("#step-1 pre.raw-request")
        assert RAW_NEEDLE in box.locator("pre.raw-request").inner_text()
        assert '"content": "Done."' in box.locator("pre.raw-response").inner_text()
        assert len(fetched) == 1 and fetched[0].endswith(f"/api/trials/{trial_id}/raw/1?run=docs")
        box.scroll_into_view_if_needed()
        _shot(page, tmp_path, "trial-raw")
        assert page.errors == []
