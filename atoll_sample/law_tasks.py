"""Project Atlas tasks in Law: answers computed from the world's own data; the tasks themselves
are data (``tasks/atlas_law.yaml``)."""

from __future__ import annotations

import re
from pathlib import Path

from atoll.benchmark import Task
from atoll_sample._tasks import GoldWriter, paragraph_index, replace_paragraph, tasks_from_data
from atoll_sample._world import WorldDraft
from atoll_sample.documents import write_document
from atoll_sample.people import CATHERINE, ELENA, GIDEON, NADIA


def _all_named(names: list[str]) -> str:
    """A regex matching text that names every one of ``names``, in any order."""
    return "(?s)" + "".join(f"(?=.*{re.escape(name)})" for name in names)


def build_tasks(draft: WorldDraft, benchmark_root: Path) -> list[Task]:
    facts = draft.facts
    register = facts["register"]

    flagged = [(name, amount) for name, _kind, amount, coc in register if coc != "None"]
    share = 100 * sum(a for _n, a in flagged) / facts["revenue"][2]
    names = [n for n, _a in flagged]
    change_of_control = {
        "names": ", ".join(names),
        "names_pattern": _all_named(names),
        "share": share,
        "share_value": round(share, 3),
        "financials": facts["financials"],
    }

    # The key-terms memo for the General Counsel.
    output = "/Outputs/Atlas SPA key terms memo.docx"
    terms = [
        ["Term", "SPA draft v4"],
        ["Base Purchase Price", f"${facts['base_price']:,}"],
        ["Escrow Amount", f"${facts['escrow']:,} (18 months)"],
        ["Outside Date", facts["outside_date"]],
        ["Reverse termination fee", f"${facts['reverse_fee']:,}"],
        ["Governing law", "Delaware"],
    ]
    content = [
        {"type": "heading", "text": "Memo: Atlas SPA draft v4 - key terms", "level": 1},
        {"type": "paragraph", "text": f"To: {NADIA['name']}, General Counsel. From: {ELENA['name']}."},
        {"type": "table", "rows": terms, "header": True},
    ]
    write_document(
        GoldWriter(benchmark_root, "atlas-05-spa-key-terms-memo").path(output),
        [("heading", content[0]["text"], 1), ("para", content[1]["text"]), ("table", terms)],
    )
    key_terms = {
        "output": output,
        "content": content,
        "spa": facts["spa"],
        "base_price": facts["base_price"],
        "escrow": facts["escrow"],
        "reverse_fee": facts["reverse_fee"],
        "outside_date": facts["outside_date"],
    }

    # The scanned demand letter added to the disclosure schedule.
    schedule_path = facts["schedule"]
    index = paragraph_index(draft.fs(schedule_path), facts["schedule_placeholder"])
    alder = facts["alder"]
    item = f"3. Demand letter dated {alder['date']} from {alder['claimant']} alleging breach of the {alder['contract']} and claiming {alder['amount']}; no proceedings filed."
    gold = GoldWriter(benchmark_root, "atlas-06-disclosure-schedule")
    replace_paragraph(gold.edited_copy(draft.fs(schedule_path), schedule_path), index, item)
    schedule = {
        "schedule": schedule_path,
        "demand_letter": facts["demand_letter"],
        "alder": alder,
        "amount": alder["amount"].lstrip("$"),
        "index": index,
        "item": item,
    }

    # The consent list to outside counsel.
    consent = [name for name, _kind, _amount, coc in register if coc == "Consent required"]
    consent_email = {
        "consent": consent,
        "consent_list": ", ".join(consent),
        "consent_pattern": _all_named(consent),
        "body": "Hi Catherine,\n\nThe Lumen contracts requiring counterparty consent on a change of control are:\n"
        + "".join(f"- {n}\n" for n in consent)
        + "\nBest,\nElena",
    }

    # The calendar invite for the SPA call.
    invitees = [GIDEON["email"], CATHERINE["email"], NADIA["email"]]
    call = facts["spa_call"]
    invite = call | {"invitees": invitees, "attendees": [{"email": e} for e in invitees]}

    shared = {
        "register": facts["register_csv"],
        "elena": ELENA["email"],
        "catherine": CATHERINE["email"],
        "nadia": NADIA["email"],
    }
    values = {
        "atlas-04-change-of-control": change_of_control,
        "atlas-05-spa-key-terms-memo": key_terms,
        "atlas-06-disclosure-schedule": schedule,
        "atlas-07-consent-email": consent_email,
        "atlas-08-spa-call-invite": invite,
    }
    return tasks_from_data(
        "atlas_law", draft.world_id, benchmark_root, {k: shared | v for k, v in values.items()}
    )
