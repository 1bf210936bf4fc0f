"""The sample worlds' personas (docs/coworkers.md) and the task that needs what only one knows."""

from __future__ import annotations

import json
from pathlib import Path

from atoll.benchmark import Task
from atoll.coworkers import PERSONAS_FILE
from atoll_sample._tasks import tasks_from_data
from atoll_sample._world import WorldDraft
from atoll_sample.people import MARGARET, NADIA, ROBERT, TOMAS

#: What only Margaret knows: the board's cap on the Phase 2 implementation budget.
PHASE2_CAP_USD = 1_850_000
PHASE2_CAP = "$1.85M"
ASK_SUBJECT = "Phase 2 implementation budget cap"


def _persona(
    person: dict[str, str], role: str, persona: str, knows: list[str], boundaries: list[str]
) -> dict:
    return {
        "name": person["name"],
        "email": person["email"],
        "role": f"{person['title']}, {person['company']}: {role}",
        "persona": persona,
        "knows": knows,
        "boundaries": boundaries,
        "channels": ["chat", "mail"],
        "reply_delay_s": 0,
    }


def build_keystone_personas(draft: WorldDraft) -> None:
    """The client (Margaret, CFO) and the senior colleague (Tomás, the engagement partner)."""
    personas = [
        _persona(
            MARGARET,
            "the client's sponsor of the procurement engagement",
            "Precise and brief; answers in two or three sentences and signs 'Margaret'.",
            [
                f"At its February 28, 2024 meeting Halvorsen's board capped the Phase 2 implementation budget "
                f"at {PHASE2_CAP} (USD {PHASE2_CAP_USD:,}); the minutes are not out yet.",
            ],
            [
                "Does not discuss Halvorsen's negotiations with other consulting firms.",
                "Does not know plant-level headcount; refers such questions to Linnea Berg.",
            ],
        ),
        _persona(
            TOMAS,
            "the engagement partner Priya reports to",
            "Warm but busy partner; answers quickly, pushes for client-ready numbers.",
            ["The Phase 2 proposal should be sent to the client by March 15, 2024."],
            ["Does not know board decisions at Halvorsen that the client has not shared with the team."],
        ),
    ]
    draft.apps(PERSONAS_FILE).write_text(
        json.dumps(personas, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    draft.facts["phase2_cap"] = PHASE2_CAP_USD


def build_atlas_personas(draft: WorldDraft) -> None:
    """The client-side principal (Robert, CEO) and the senior colleague (Nadia, General Counsel)."""
    personas = [
        _persona(
            ROBERT,
            "the principal of the Lumen acquisition",
            "Decisive CEO; one-line answers.",
            ["He wants any offer above $450M cleared with him by phone first."],
            ["Does not discuss Corvane's other acquisition targets."],
        ),
        _persona(
            NADIA,
            "in-house counsel on the Lumen acquisition",
            "Careful lawyer; answers in full sentences and flags risk.",
            ["Outside counsel's fee estimate for the SPA is capped at $600,000."],
            ["Gives no view on valuation.", "Does not share privileged advice by chat."],
        ),
    ]
    draft.apps(PERSONAS_FILE).write_text(
        json.dumps(personas, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )


def build_tasks(draft: WorldDraft, benchmark_root: Path) -> list[Task]:
    """keystone-10 (``tasks/keystone_coworkers.yaml``): a number no file holds; the agent must
    ask the client for it."""
    values = {
        "user": draft.user["email"],
        "margaret": MARGARET["email"],
        "subject": ASK_SUBJECT,
        "cap": PHASE2_CAP,
        "cap_usd": PHASE2_CAP_USD,
    }
    return tasks_from_data(
        "keystone_coworkers", draft.world_id, benchmark_root, {"keystone-10-ask-client-budget-cap": values}
    )
