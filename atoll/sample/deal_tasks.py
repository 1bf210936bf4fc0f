"""Project Atlas tasks (Investment Banking and Law): answers computed from the world's own data."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from atoll.benchmark import Task
from atoll.sample import deal_apps as apps
from atoll.sample import deal_files as files
from atoll.sample._tasks import (
    GoldWriter,
    criterion,
    make_task,
    paragraph_index,
    replace_in_deck,
    replace_paragraph,
    step,
)
from atoll.sample._world import WorldDraft
from atoll.sample.documents import write_document
from atoll.sample.people import CATHERINE, ELENA, GIDEON, NADIA
from atoll.sample.sheets import Sheet, write_workbook

BANKING = "Investment Banking"
LAW = "Law"


def build_tasks(draft: WorldDraft, benchmark_root: Path) -> list[Task]:
    facts = draft.facts
    world = draft.world_id
    ebitda_m = facts["ebitda_adjusted"] / 1000
    comp_multiples = [(cap + debt) / ebitda for _n, cap, debt, _rev, ebitda in facts["comps"]]
    precedent_multiples = [ev / ebitda for _a, _t, ev, ebitda in facts["precedents"]]
    tasks: list[Task] = []

    # 1. Median trading multiple and implied value.
    task_id = "atlas-01-comps-implied-ev"
    median = statistics.median(comp_multiples)
    implied = median * ebitda_m
    tasks.append(
        make_task(
            task_id=task_id,
            name="Implied EV from trading comps",
            domain=BANKING,
            world_id=world,
            output="message_in_console",
            prompt=(
                "Using Sterling Rowe's comps file in /Valuation, what is the median EV / LTM EBITDA of the trading comps, and "
                "what enterprise value does it imply for Lumen on its adjusted FY2023 EBITDA (after the adjustments in the "
                "data room financials)? Give the multiple to one decimal and the value in USD millions."
            ),
            rubric=[
                criterion(
                    task_id,
                    1,
                    f"Median EV/LTM EBITDA of about {median:.1f}x",
                    "final_answer",
                    {"kind": "answer_number", "value": round(median, 3), "tolerance": 0.05},
                ),
                criterion(
                    task_id,
                    2,
                    f"Implied enterprise value of about ${implied:,.0f}M",
                    "final_answer",
                    {"kind": "answer_number", "value": round(implied, 2), "rel_tolerance": 0.01},
                ),
                criterion(
                    task_id,
                    3,
                    f"Uses adjusted FY2023 EBITDA of ${ebitda_m:,.1f}M, not reported EBITDA",
                    "final_answer",
                ),
            ],
            steps=[
                step("spreadsheets_read_tab", file_path=files.COMPS, tab_index=0),
                step("spreadsheets_read_tab", file_path=files.FINANCIALS, tab_index=1),
            ],
            final_answer=f"Median EV/LTM EBITDA is {median:.1f}x; on adjusted FY2023 EBITDA of ${ebitda_m:,.1f}M that implies an EV of about ${implied:,.0f}M.",
        )
    )

    # 2. Football field workbook, with precedents from the task's own input file.
    task_id = "atlas-02-football-field"
    gold = GoldWriter(benchmark_root, task_id)
    overlay = benchmark_root / "task_files" / task_id / "filesystem" / files.PRECEDENTS_INPUT.lstrip("/")
    overlay.parent.mkdir(parents=True, exist_ok=True)
    overlay.write_text(facts["precedents_csv"], encoding="utf-8")
    output = "/Outputs/Atlas_valuation_summary.xlsx"
    headers = ["Method", "Low multiple", "High multiple", "Implied EV low (USD M)", "Implied EV high (USD M)"]
    rows = []
    for label, multiples in (
        ("Trading comps", comp_multiples),
        ("Precedent transactions", precedent_multiples),
    ):
        low, _mid, high = statistics.quantiles(multiples, n=4, method="inclusive")
        rows.append(
            [label, round(low, 4), round(high, 4), round(low * ebitda_m, 2), round(high * ebitda_m, 2)]
        )
    write_workbook(
        gold.path(output),
        [
            Sheet(
                "Football Field",
                [headers, *rows],
                {"B": '0.0"x"', "C": '0.0"x"', "D": "#,##0.0", "E": "#,##0.0"},
            )
        ],
    )
    cells = [
        ("D2", "low end of the trading comps range", rows[0][3]),
        ("E2", "high end of the trading comps range", rows[0][4]),
        ("D3", "low end of the precedents range", rows[1][3]),
        ("E3", "high end of the precedents range", rows[1][4]),
    ]
    tasks.append(
        make_task(
            task_id=task_id,
            name="Valuation football field",
            domain=BANKING,
            world_id=world,
            output="make_new_sheet",
            input_files=[files.PRECEDENTS_INPUT],
            prompt=(
                "Build /Outputs/Atlas_valuation_summary.xlsx with a sheet 'Football Field'. Row 1 headers: Method, Low "
                "multiple, High multiple, Implied EV low (USD M), Implied EV high (USD M). Row 2 'Trading comps' (comps file "
                "in /Valuation), row 3 'Precedent transactions' (the list Aisha sent, in /Inputs). Low and high are the 25th "
                "and 75th percentiles of EV / LTM EBITDA (Excel QUARTILE.INC); implied EVs apply them to Lumen's adjusted "
                "FY2023 EBITDA. Do not round the multiples before multiplying."
            ),
            rubric=[
                criterion(
                    task_id,
                    1,
                    "An xlsx workbook was created in /Outputs",
                    "file_type",
                    {"kind": "file_exists", "file_type": "xlsx", "path": "/Outputs/*.xlsx"},
                    file_type="xlsx",
                )
            ]
            + [
                criterion(
                    task_id,
                    n,
                    f"{cell}: {what} is about ${value:,.1f}M",
                    "file",
                    {
                        "kind": "cell_value",
                        "path": output,
                        "sheet": "Football Field",
                        "cell": cell,
                        "value": value,
                        "tolerance": 1.5,
                    },
                    path=output,
                )
                for n, (cell, what, value) in enumerate(cells, start=2)
            ],
            steps=[
                step("spreadsheets_read_tab", file_path=files.COMPS, tab_index=0),
                step("spreadsheets_read_csv", file_path=files.PRECEDENTS_INPUT),
                step(
                    "spreadsheets_create_spreadsheet",
                    directory="/Outputs",
                    file_name="Atlas_valuation_summary.xlsx",
                    sheets=[{"name": "Football Field", "headers": headers, "rows": rows}],
                ),
            ],
            final_answer=f"Created {output}: trading comps ${rows[0][3]:,.0f}M-${rows[0][4]:,.0f}M, precedents ${rows[1][3]:,.0f}M-${rows[1][4]:,.0f}M.",
            gold_files=[gold.describe(output, "Football field with quartile ranges")],
        )
    )

    # 3. Update the board deck to the revised offer.
    task_id = "atlas-03-board-deck-offer"
    gold = GoldWriter(benchmark_root, task_id)
    new_multiple = files.multiple_text(apps.REVISED_PRICE / 1e6, facts["ebitda_adjusted"])
    replacements = {"$410M": "$435M", facts["board_multiple"]: new_multiple}
    replace_in_deck(gold.edited_copy(draft.fs(files.BOARD_DECK), files.BOARD_DECK), replacements)
    tasks.append(
        make_task(
            task_id=task_id,
            name="Board deck: revised offer",
            domain=BANKING,
            world_id=world,
            output="edit_existing_slide_deck",
            prompt="Robert emailed about the board's decision on our offer for Lumen. Make the change he asked for in the March board deck.",
            rubric=[
                criterion(
                    task_id,
                    1,
                    "The board deck shows the revised offer of $435M",
                    "file",
                    {
                        "kind": "file_exists",
                        "file_type": "pptx",
                        "path": files.BOARD_DECK,
                        "contains": ["$435M"],
                    },
                    path=files.BOARD_DECK,
                ),
                criterion(
                    task_id,
                    2,
                    f"The implied multiple is updated to {new_multiple} adjusted FY2023 EBITDA",
                    "file",
                    {
                        "kind": "file_exists",
                        "file_type": "pptx",
                        "path": files.BOARD_DECK,
                        "contains": [new_multiple],
                    },
                    path=files.BOARD_DECK,
                ),
            ],
            steps=[
                step("mail_search_mail", subject="revised offer"),
                step(
                    "presentations_edit_slides",
                    file_path=files.BOARD_DECK,
                    operations=[
                        {"type": "replace_text", "slide_index": None, "search": old, "replace": new}
                        for old, new in replacements.items()
                    ],
                ),
            ],
            final_answer=f"Updated the transaction overview to $435M ({new_multiple} adjusted FY2023 EBITDA).",
            gold_files=[gold.describe(files.BOARD_DECK, "Board deck at $435M")],
        )
    )

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
                step("spreadsheets_read_csv", file_path=files.REGISTER),
                step("spreadsheets_read_tab", file_path=files.FINANCIALS, tab_index=0),
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
        ["Base Purchase Price", f"${files.BASE_PRICE:,}"],
        ["Escrow Amount", f"${files.ESCROW:,} (18 months)"],
        ["Outside Date", files.OUTSIDE_DATE],
        ["Reverse termination fee", f"${files.REVERSE_FEE:,}"],
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
                        "contains": [f"{files.BASE_PRICE:,}", f"{files.ESCROW:,}"],
                    },
                    file_type="docx",
                ),
                criterion(
                    task_id,
                    2,
                    f"It gives the outside date {files.OUTSIDE_DATE}",
                    "file_type",
                    {
                        "kind": "file_exists",
                        "file_type": "docx",
                        "path": "/Outputs/*.docx",
                        "contains": [files.OUTSIDE_DATE],
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
                        "contains": [f"{files.REVERSE_FEE:,}", "Delaware"],
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
                step("documents_read_document_content", file_path=files.SPA),
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
    index = paragraph_index(draft.fs(files.SCHEDULE), files.SCHEDULE_PLACEHOLDER)
    alder = files.ALDER
    item = f"3. Demand letter dated {alder['date']} from {alder['claimant']} alleging breach of the {alder['contract']} and claiming {alder['amount']}; no proceedings filed."
    replace_paragraph(gold.edited_copy(draft.fs(files.SCHEDULE), files.SCHEDULE), index, item)
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
                        "path": files.SCHEDULE,
                        "contains": ["Alder Fabrication", alder["amount"].lstrip("$")],
                    },
                    path=files.SCHEDULE,
                ),
                criterion(
                    task_id,
                    2,
                    f"The item gives the letter date ({alder['date']}) and the contract ({alder['contract']})",
                    "file",
                    path=files.SCHEDULE,
                ),
                criterion(
                    task_id,
                    3,
                    "The placeholder is removed and items 1 and 2 are unchanged",
                    "file",
                    path=files.SCHEDULE,
                ),
            ],
            steps=[
                step("pdfs_read_pdf_pages", file_path=files.DEMAND_LETTER, pages="1-2"),
                step(
                    "documents_edit_content_text",
                    file_path=files.SCHEDULE,
                    identifier=f"body.p.{index}",
                    new_text=item,
                ),
            ],
            final_answer="Added the Alder Fabrication demand letter as item 3 of Schedule 3.12.",
            gold_files=[gold.describe(files.SCHEDULE, "Schedule with the Alder item")],
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
                step("spreadsheets_read_csv", file_path=files.REGISTER),
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
