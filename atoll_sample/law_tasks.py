"""Project Atlas tasks in Law: answers computed from the world's own data."""

from __future__ import annotations

import re
from pathlib import Path

from atoll.benchmark import Task
from atoll_sample import deal_apps as apps
from atoll_sample import deal_files as finance
from atoll_sample import deal_legal as legal
from atoll_sample._tasks import (
    GoldWriter,
    criterion,
    make_task,
    paragraph_index,
    replace_paragraph,
    step,
)
from atoll_sample._world import WorldDraft
from atoll_sample.documents import write_document
from atoll_sample.people import CATHERINE, ELENA, GIDEON, NADIA

BANKING = "Investment Banking"
LAW = "Law"


def build_tasks(draft: WorldDraft, benchmark_root: Path) -> list[Task]:
    facts = draft.facts
    world = draft.world_id
    tasks: list[Task] = []

    # 4. Change-of-control exposure.
    task_id = "atlas-04-change-of-control"
    flagged = [(name, amount) for name, _kind, amount, coc in facts["register"] if coc != "None"]
    share = 100 * sum(a for _n, a in flagged) / facts["revenue"][2]
    names = [n for n, _a in flagged]
    tasks.append(
        make_task(
            task_id=task_id,
            name="Change-of-control exposure",
            domain=LAW,
            world_id=world,
            output="message_in_console",
            prompt=(
                "Which of Lumen's material contracts give the counterparty a termination or consent right on a change of "
                "control, and what share of Lumen's FY2023 revenue (per the income statement) do they represent together? "
                "Give the percentage to one decimal."
            ),
            rubric=[
                criterion(
                    task_id,
                    1,
                    "Names every contract with a change-of-control right: " + ", ".join(names),
                    "final_answer",
                    {
                        "kind": "answer_regex",
                        "pattern": "(?s)" + "".join(f"(?=.*{re.escape(n)})" for n in names),
                    },
                ),
                criterion(
                    task_id,
                    2,
                    f"States their combined share of FY2023 revenue as about {share:.1f}%",
                    "final_answer",
                    {"kind": "answer_number", "value": round(share, 3), "tolerance": 0.15},
                ),
                criterion(
                    task_id,
                    3,
                    "Does not include contracts without a change-of-control provision",
                    "final_answer",
                ),
            ],
            steps=[
                step("spreadsheets_read_csv", file_path=legal.REGISTER),
                step("spreadsheets_read_tab", file_path=finance.FINANCIALS, tab_index=0),
            ],
            final_answer=f"{', '.join(names)} have change-of-control rights; together {share:.1f}% of FY2023 revenue.",
        )
    )

    # 5. Key-terms memo for the General Counsel.
    task_id = "atlas-05-spa-key-terms-memo"
    gold = GoldWriter(benchmark_root, task_id)
    output = "/Outputs/Atlas SPA key terms memo.docx"
    terms = [
        ["Term", "SPA draft v4"],
        ["Base Purchase Price", f"${legal.BASE_PRICE:,}"],
        ["Escrow Amount", f"${legal.ESCROW:,} (18 months)"],
        ["Outside Date", legal.OUTSIDE_DATE],
        ["Reverse termination fee", f"${legal.REVERSE_FEE:,}"],
        ["Governing law", "Delaware"],
    ]
    content = [
        {"type": "heading", "text": "Memo: Atlas SPA draft v4 - key terms", "level": 1},
        {"type": "paragraph", "text": f"To: {NADIA['name']}, General Counsel. From: {ELENA['name']}."},
        {"type": "table", "rows": terms, "header": True},
    ]
    write_document(
        gold.path(output),
        [("heading", content[0]["text"], 1), ("para", content[1]["text"]), ("table", terms)],
    )
    tasks.append(
        make_task(
            task_id=task_id,
            name="SPA key-terms memo",
            domain=LAW,
            world_id=world,
            output="make_new_doc",
            prompt=(
                "Write a one-page memo to Nadia at /Outputs/Atlas SPA key terms memo.docx summarising the key terms of the "
                "SPA draft v4: base purchase price, escrow amount and period, outside date, reverse termination fee and "
                "governing law. Quote amounts and dates exactly as the draft writes them."
            ),
            rubric=[
                criterion(
                    task_id,
                    1,
                    "A memo states the base purchase price and escrow amount as in the draft",
                    "file_type",
                    {
                        "kind": "file_exists",
                        "file_type": "docx",
                        "path": "/Outputs/*.docx",
                        "contains": [f"{legal.BASE_PRICE:,}", f"{legal.ESCROW:,}"],
                    },
                    file_type="docx",
                ),
                criterion(
                    task_id,
                    2,
                    f"It gives the outside date {legal.OUTSIDE_DATE}",
                    "file_type",
                    {
                        "kind": "file_exists",
                        "file_type": "docx",
                        "path": "/Outputs/*.docx",
                        "contains": [legal.OUTSIDE_DATE],
                    },
                    file_type="docx",
                ),
                criterion(
                    task_id,
                    3,
                    "It states the reverse termination fee and Delaware governing law",
                    "file_type",
                    {
                        "kind": "file_exists",
                        "file_type": "docx",
                        "path": "/Outputs/*.docx",
                        "contains": [f"{legal.REVERSE_FEE:,}", "Delaware"],
                    },
                    file_type="docx",
                ),
                criterion(
                    task_id,
                    4,
                    "It is addressed to Nadia and mentions the 18-month escrow period",
                    "file_type",
                    file_type="docx",
                ),
            ],
            steps=[
                step("documents_read_document_content", file_path=legal.SPA),
                step(
                    "documents_create_document",
                    directory="/Outputs",
                    file_name="Atlas SPA key terms memo.docx",
                    content=content,
                ),
            ],
            final_answer=f"Wrote {output}.",
            gold_files=[gold.describe(output, "Key-terms memo")],
        )
    )

    # 6. Add the scanned demand letter to the disclosure schedule.
    task_id = "atlas-06-disclosure-schedule"
    gold = GoldWriter(benchmark_root, task_id)
    index = paragraph_index(draft.fs(legal.SCHEDULE), legal.SCHEDULE_PLACEHOLDER)
    alder = legal.ALDER
    item = f"3. Demand letter dated {alder['date']} from {alder['claimant']} alleging breach of the {alder['contract']} and claiming {alder['amount']}; no proceedings filed."
    replace_paragraph(gold.edited_copy(draft.fs(legal.SCHEDULE), legal.SCHEDULE), index, item)
    tasks.append(
        make_task(
            task_id=task_id,
            name="Disclosure schedule: litigation",
            domain=LAW,
            world_id=world,
            output="edit_existing_doc",
            prompt=(
                "Schedule 3.12 (Litigation) of the disclosure schedule draft still has a reserved placeholder pending our "
                "review of data room folder 04. Replace it with item 3 describing the matter in that folder: who, the "
                "date of the letter, the contract concerned and the amount claimed exactly as stated."
            ),
            rubric=[
                criterion(
                    task_id,
                    1,
                    "Schedule 3.12 lists the Alder Fabrication claim with the amount claimed",
                    "file",
                    {
                        "kind": "file_exists",
                        "file_type": "docx",
                        "path": legal.SCHEDULE,
                        "contains": ["Alder Fabrication", alder["amount"].lstrip("$")],
                    },
                    path=legal.SCHEDULE,
                ),
                criterion(
                    task_id,
                    2,
                    f"The item gives the letter date ({alder['date']}) and the contract ({alder['contract']})",
                    "file",
                    path=legal.SCHEDULE,
                ),
                criterion(
                    task_id,
                    3,
                    "The placeholder is removed and items 1 and 2 are unchanged",
                    "file",
                    path=legal.SCHEDULE,
                ),
            ],
            steps=[
                step("pdfs_read_pdf_pages", file_path=legal.DEMAND_LETTER, pages="1-2"),
                step(
                    "documents_edit_content_text",
                    file_path=legal.SCHEDULE,
                    identifier=f"body.p.{index}",
                    new_text=item,
                ),
            ],
            final_answer="Added the Alder Fabrication demand letter as item 3 of Schedule 3.12.",
            gold_files=[gold.describe(legal.SCHEDULE, "Schedule with the Alder item")],
        )
    )

    # 7. Consent list to outside counsel.
    task_id = "atlas-07-consent-email"
    consent = [name for name, _kind, _amount, coc in facts["register"] if coc == "Consent required"]
    body = (
        "Hi Catherine,\n\nThe Lumen contracts requiring counterparty consent on a change of control are:\n"
        + "".join(f"- {n}\n" for n in consent)
        + "\nBest,\nElena"
    )
    tasks.append(
        make_task(
            task_id=task_id,
            name="Consent list for counsel",
            domain=LAW,
            world_id=world,
            output="message_in_console",
            prompt="Do what Nadia asked me by email about change-of-control consents, then confirm which contracts you listed.",
            rubric=[
                criterion(
                    task_id,
                    1,
                    "An email to Catherine, copying Nadia, lists every consent-required contract",
                    "app_data",
                    {
                        "kind": "email_sent",
                        "to": [CATHERINE["email"], NADIA["email"]],
                        "body_contains": consent,
                    },
                ),
                criterion(
                    task_id,
                    2,
                    "The email does not list contracts that only carry a termination right",
                    "app_data",
                ),
                criterion(
                    task_id,
                    3,
                    "The final answer names the contracts listed",
                    "final_answer",
                    {
                        "kind": "answer_regex",
                        "pattern": "(?s)" + "".join(f"(?=.*{re.escape(n)})" for n in consent),
                    },
                ),
            ],
            steps=[
                step("mail_search_mail", subject="consents"),
                step("spreadsheets_read_csv", file_path=legal.REGISTER),
                step(
                    "mail_send_mail",
                    from_email=ELENA["email"],
                    to_email=CATHERINE["email"],
                    cc=[NADIA["email"]],
                    subject="Lumen change-of-control consents",
                    body=body,
                ),
            ],
            final_answer=f"Sent Catherine (cc Nadia) the consent-required contracts: {', '.join(consent)}.",
        )
    )

    # 8. Calendar invite for the SPA call.
    task_id = "atlas-08-spa-call-invite"
    call = apps.SPA_CALL
    invitees = [GIDEON["email"], CATHERINE["email"], NADIA["email"]]
    tasks.append(
        make_task(
            task_id=task_id,
            name="Invite for the SPA negotiation call",
            domain=LAW,
            world_id=world,
            output="message_in_console",
            prompt=(
                "Catherine asked me to send the invite for the SPA negotiation call with seller's counsel. Create it in my "
                "calendar in the slot that works for everyone, with a title containing 'SPA negotiation', and tell me when it is."
            ),
            rubric=[
                criterion(
                    task_id,
                    1,
                    "An 'SPA negotiation' event on March 7, 2024 invites Gideon, Catherine and Nadia",
                    "app_data",
                    {
                        "kind": "event_created",
                        "summary_contains": "SPA negotiation",
                        "date": call["date"],
                        "attendees": invitees,
                    },
                ),
                criterion(task_id, 2, "The event runs 10:00-11:00 am Eastern (60 minutes)", "app_data"),
                criterion(
                    task_id,
                    3,
                    "The final answer gives the date and time",
                    "final_answer",
                    {
                        "kind": "answer_regex",
                        "pattern": r"(March 7|7 March|2024-03-07|3/7).*10(:00)?\s*(am|a\.m\.)?",
                    },
                ),
            ],
            steps=[
                step("mail_search_mail", subject="SPA negotiation call"),
                step(
                    "calendar_create_event",
                    summary="SPA negotiation call (Atlas)",
                    start={"dateTime": call["start"], "timeZone": call["zone"]},
                    end={"dateTime": call["end"], "timeZone": call["zone"]},
                    attendees=[{"email": e} for e in invitees],
                    description="Open SPA points: locked box, escrow, reverse termination fee.",
                    location="Video call",
                ),
            ],
            final_answer="Created 'SPA negotiation call (Atlas)' on Thursday, March 7, 2024 at 10:00 am ET for 60 minutes with Gideon, Catherine and Nadia.",
        )
    )
    return tasks
