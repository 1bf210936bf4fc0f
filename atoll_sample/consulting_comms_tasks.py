"""Project Keystone tasks on deliverables and communication (Management Consulting), from the
world's data; the tasks themselves are data (``tasks/keystone_comms.yaml``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from atoll.benchmark import Task
from atoll_sample._tasks import (
    GoldWriter,
    paragraph_index,
    replace_in_deck,
    replace_paragraph,
    tasks_from_data,
)
from atoll_sample._world import WorldDraft
from atoll_sample.consulting_files import money_m, savings
from atoll_sample.people import MARGARET, PRIYA, TOMAS

MACON_DATE = "Tuesday, March 12, 2024"


def build_tasks(draft: WorldDraft, benchmark_root: Path) -> list[Task]:
    facts = draft.facts
    next_steerco = facts["next_steerco"]
    total_savings = savings(facts).total
    theme_counts = Counter(issue for interview in facts["interviews"] for issue in interview["issues"])
    top_theme = theme_counts.most_common(1)[0][0]

    # The placeholders of the SteerCo draft deck, filled in.
    task_id = "keystone-05-fill-steerco-draft"
    replacements = {"$[TBD]M": money_m(total_savings), "[TBC]": next_steerco}
    gold = GoldWriter(benchmark_root, task_id)
    deck = facts["steerco_deck"]
    replace_in_deck(gold.edited_copy(draft.fs(deck), deck), replacements)
    steerco_draft = {
        "deck": deck,
        "total_m": money_m(total_savings),
        "next_steerco": next_steerco,
        "operations": [
            {"type": "replace_text", "slide_index": None, "search": old, "replace": new}
            for old, new in replacements.items()
        ],
    }

    # The interview placeholder of the interim report, replaced.
    task_id = "keystone-06-interview-summary"
    report = facts["interim_doc"]
    index = paragraph_index(draft.fs(report), facts["interview_placeholder"])
    plants_seen = [interview["plant"] for interview in facts["interviews"]]
    summary = (
        f"We interviewed the plant managers of {', '.join(plants_seen[:-1])} and {plants_seen[-1]}. The most common "
        f"issue was {top_theme} ({theme_counts[top_theme]} of 4 plants), followed by "
        + " and ".join(f"{issue} ({n})" for issue, n in theme_counts.most_common(3)[1:])
        + "."
    )
    gold = GoldWriter(benchmark_root, task_id)
    replace_paragraph(gold.edited_copy(draft.fs(report), report), index, summary)
    interview_summary = {
        "report": report,
        "plants": plants_seen,
        "top_theme": top_theme,
        "top_theme_count": theme_counts[top_theme],
        "read_interviews": [
            {"tool": "filesystem_read_text_file", "arguments": {"file_path": interview["path"]}}
            for interview in facts["interviews"]
        ],
        "index": index,
        "summary": summary,
    }

    # The procurement headcount, emailed to the CFO.
    procurement = {
        plant: fte for (plant, function), fte in facts["headcount"].items() if function == "Procurement"
    }
    total_fte = sum(procurement.values())
    top_plant = max(procurement, key=procurement.get)
    headcount_email = {
        "total_fte": total_fte,
        "total_fte_text": str(total_fte),
        "top_plant": top_plant,
        "top_fte": procurement[top_plant],
        "headcount_csv": facts["headcount_csv"],
        "priya": PRIYA["email"],
        "margaret": MARGARET["email"],
        "tomas": TOMAS["email"],
        "body": f"Hi Margaret,\n\nPer the January 2024 headcount file, Halvorsen has {total_fte} procurement FTEs across "
        f"the six plants. {top_plant} has the most, with {procurement[top_plant]}.\n\nBest,\nPriya",
    }

    # A teammate answered in chat from the calendar.
    macon_visit = {
        "location": facts["macon_location"],
        "space_id": facts["core_space_id"],
        "space_name": facts["core_space_name"],
        "message": f"Macon plant visit is on {MACON_DATE} (all day) at {facts['macon_location']}.",
    }

    values = {
        "keystone-05-fill-steerco-draft": steerco_draft,
        "keystone-06-interview-summary": interview_summary,
        "keystone-07-headcount-email": headcount_email,
        "keystone-08-macon-visit-chat": macon_visit,
    }
    return tasks_from_data("keystone_comms", draft.world_id, benchmark_root, values)
