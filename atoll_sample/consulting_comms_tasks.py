"""Project Keystone tasks on deliverables and communication (Management Consulting), from the world's data."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from atoll.benchmark import Task
from atoll_sample import consulting_apps as apps
from atoll_sample import consulting_files as files
from atoll_sample._tasks import (
    GoldWriter,
    criterion,
    make_task,
    paragraph_index,
    replace_in_deck,
    replace_paragraph,
    step,
)
from atoll_sample._world import WorldDraft
from atoll_sample.people import MARGARET, PRIYA, TOMAS

DOMAIN = "Management Consulting"
NEXT_STEERCO = "Thursday, March 14, 2024"
MACON_DATE = "Tuesday, March 12, 2024"


def _money_m(value: float) -> str:
    return f"${value / 1e6:.1f}M"


def build_tasks(draft: WorldDraft, benchmark_root: Path) -> list[Task]:
    facts = draft.facts
    world = draft.world_id
    spend, rates = facts["spend"], facts["rates"]
    addressable = [r for r in spend if r[5] == "Y"]
    by_category = {c: sum(r[3] for r in addressable if r[0] == c) for c in rates}
    savings_by_category = {c: by_category[c] * rates[c] for c in rates}
    total_savings = sum(savings_by_category.values())
    theme_counts = Counter(issue for _path, issues in files.INTERVIEWS.values() for issue in issues)
    top_theme = theme_counts.most_common(1)[0][0]
    tasks: list[Task] = []

    # 5. Fill the placeholders of the SteerCo draft deck.
    task_id = "keystone-05-fill-steerco-draft"
    gold = GoldWriter(benchmark_root, task_id)
    replacements = {"$[TBD]M": _money_m(total_savings), "[TBC]": NEXT_STEERCO}
    replace_in_deck(gold.edited_copy(draft.fs(files.STEERCO_DECK), files.STEERCO_DECK), replacements)
    tasks.append(
        make_task(
            task_id=task_id,
            name="Fill in the SteerCo draft",
            domain=DOMAIN,
            world_id=world,
            output="edit_existing_slide_deck",
            prompt=(
                "The SteerCo draft deck in Deliverables/SteerCo still has two placeholders on the executive summary. Fill in "
                "the identified target savings (USD millions, one decimal, from the spend cube's current assumptions) and "
                "the date of the next SteerCo after today (March 1, 2024) from my calendar. Edit the existing deck."
            ),
            rubric=[
                criterion(
                    task_id,
                    1,
                    f"The draft deck states target savings of {_money_m(total_savings)}",
                    "file",
                    {
                        "kind": "file_exists",
                        "file_type": "pptx",
                        "path": files.STEERCO_DECK,
                        "contains": [_money_m(total_savings)],
                    },
                    path=files.STEERCO_DECK,
                ),
                criterion(
                    task_id,
                    2,
                    f"The next SteerCo is given as {NEXT_STEERCO} and no placeholder remains",
                    "file",
                    path=files.STEERCO_DECK,
                ),
            ],
            steps=[
                step("presentations_read_completedeck", file_path=files.STEERCO_DECK),
                step(
                    "presentations_edit_slides",
                    file_path=files.STEERCO_DECK,
                    operations=[
                        {"type": "replace_text", "slide_index": None, "search": old, "replace": new}
                        for old, new in replacements.items()
                    ],
                ),
            ],
            final_answer=f"Filled the draft: target savings {_money_m(total_savings)}, next SteerCo {NEXT_STEERCO}.",
            gold_files=[gold.describe(files.STEERCO_DECK, "Draft deck with placeholders filled")],
        )
    )

    # 6. Replace the interview placeholder in the interim report.
    task_id = "keystone-06-interview-summary"
    gold = GoldWriter(benchmark_root, task_id)
    index = paragraph_index(draft.fs(files.INTERIM_DOC), files.INTERVIEW_PLACEHOLDER)
    plants_seen = list(files.INTERVIEWS)
    summary = (
        f"We interviewed the plant managers of {', '.join(plants_seen[:-1])} and {plants_seen[-1]}. The most common "
        f"issue was {top_theme} ({theme_counts[top_theme]} of 4 plants), followed by "
        + " and ".join(f"{issue} ({n})" for issue, n in theme_counts.most_common(3)[1:])
        + "."
    )
    replace_paragraph(gold.edited_copy(draft.fs(files.INTERIM_DOC), files.INTERIM_DOC), index, summary)
    tasks.append(
        make_task(
            task_id=task_id,
            name="Interview themes in the interim report",
            domain=DOMAIN,
            world_id=world,
            output="edit_existing_doc",
            prompt=(
                "In the interim findings draft (Deliverables/Interim Report), replace the placeholder under '3. Interview "
                "themes' with a short summary of the plant manager interviews in Research/Interviews (including the "
                "subfolders): name every plant interviewed and the most common issue, with how many plants raised it."
            ),
            rubric=[
                criterion(
                    task_id,
                    1,
                    "The interim report names every interviewed plant",
                    "file",
                    {
                        "kind": "file_exists",
                        "file_type": "docx",
                        "path": files.INTERIM_DOC,
                        "contains": plants_seen,
                    },
                    path=files.INTERIM_DOC,
                ),
                criterion(
                    task_id,
                    2,
                    f"It identifies {top_theme} as the most common issue ({theme_counts[top_theme]} of 4 plants)",
                    "file",
                    path=files.INTERIM_DOC,
                ),
                criterion(
                    task_id,
                    3,
                    "The placeholder text is gone and the rest of the document is unchanged",
                    "file",
                    path=files.INTERIM_DOC,
                ),
            ],
            steps=[
                step("filesystem_read_text_file", file_path=path) for path, _i in files.INTERVIEWS.values()
            ]
            + [
                step(
                    "documents_edit_content_text",
                    file_path=files.INTERIM_DOC,
                    identifier=f"body.p.{index}",
                    new_text=summary,
                )
            ],
            final_answer="Replaced the interview placeholder with the summary.",
            gold_files=[gold.describe(files.INTERIM_DOC, "Interim report with interview summary")],
        )
    )

    # 7. Email the CFO the procurement headcount.
    task_id = "keystone-07-headcount-email"
    procurement = {
        plant: fte for (plant, function), fte in facts["headcount"].items() if function == "Procurement"
    }
    total_fte = sum(procurement.values())
    top_plant = max(procurement, key=procurement.get)
    body = (
        f"Hi Margaret,\n\nPer the January 2024 headcount file, Halvorsen has {total_fte} procurement FTEs across the six "
        f"plants. {top_plant} has the most, with {procurement[top_plant]}.\n\nBest,\nPriya"
    )
    tasks.append(
        make_task(
            task_id=task_id,
            name="Procurement headcount for the CFO",
            domain=DOMAIN,
            world_id=world,
            output="message_in_console",
            prompt="Answer Margaret's email about procurement headcount the way she asked, then tell me what you sent.",
            rubric=[
                criterion(
                    task_id,
                    1,
                    f"An email to Margaret, copying Tomás, gives the total of {total_fte} procurement FTEs",
                    "app_data",
                    {
                        "kind": "email_sent",
                        "to": [MARGARET["email"], TOMAS["email"]],
                        "body_contains": [str(total_fte)],
                    },
                ),
                criterion(
                    task_id,
                    2,
                    f"The email names {top_plant} as the plant with the most procurement staff",
                    "app_data",
                    {"kind": "email_sent", "to": [MARGARET["email"]], "body_contains": [top_plant]},
                ),
                criterion(
                    task_id,
                    3,
                    f"The final answer reports the total of {total_fte}",
                    "final_answer",
                    {"kind": "answer_number", "value": total_fte},
                ),
            ],
            steps=[
                step("mail_search_mail", subject="headcount"),
                step("filesystem_read_text_file", file_path=files.HEADCOUNT_CSV),
                step(
                    "mail_send_mail",
                    from_email=PRIYA["email"],
                    to_email=MARGARET["email"],
                    cc=[TOMAS["email"]],
                    subject="Re: Procurement headcount across plants",
                    body=body,
                ),
            ],
            final_answer=f"Emailed Margaret (cc Tomás): {total_fte} procurement FTEs in total; {top_plant} has the most ({procurement[top_plant]}).",
        )
    )

    # 8. Answer a teammate in chat from the calendar.
    task_id = "keystone-08-macon-visit-chat"
    message = f"Macon plant visit is on {MACON_DATE} (all day) at {apps.MACON_LOCATION}."
    tasks.append(
        make_task(
            task_id=task_id,
            name="Macon visit details for Kenji",
            domain=DOMAIN,
            world_id=world,
            output="message_in_console",
            prompt="Kenji asked a question in the Keystone core team chat space that my calendar answers. Reply to him there, then summarise the answer for me.",
            rubric=[
                criterion(
                    task_id,
                    1,
                    "A message about the Macon visit was posted in the Keystone core team space",
                    "app_data",
                    {"kind": "chat_posted", "channel": apps.CORE_SPACE[1], "contains": ["Macon"]},
                ),
                criterion(
                    task_id,
                    2,
                    "The final answer gives the visit date, March 12, 2024",
                    "final_answer",
                    {"kind": "answer_regex", "pattern": r"March 12|12 March|2024-03-12|3/12"},
                ),
                criterion(
                    task_id,
                    3,
                    f"The chat reply gives the date and the address ({apps.MACON_LOCATION})",
                    "app_data",
                ),
            ],
            steps=[
                step("chat_get_channel_history", channel_id=apps.CORE_SPACE[0]),
                step("calendar_list_events", limit=50),
                step("chat_post_message", channel_id=apps.CORE_SPACE[0], message=message),
            ],
            final_answer=f"Posted in Keystone core team: {message}",
        )
    )
    return tasks
