"""Project Atlas tasks in Investment Banking: answers computed from the world's own data."""

from __future__ import annotations

import statistics
from pathlib import Path

from atoll.benchmark import Task
from atoll_sample import deal_apps as apps
from atoll_sample import deal_files as files
from atoll_sample._tasks import (
    GoldWriter,
    criterion,
    make_task,
    replace_in_deck,
    step,
)
from atoll_sample._world import WorldDraft
from atoll_sample.sheets import Sheet, write_workbook

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

    return tasks
