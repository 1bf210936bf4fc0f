"""Project Keystone tasks on the savings model (Management Consulting), from the world's data."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from atoll.benchmark import Task
from atoll_sample import consulting_files as files
from atoll_sample._tasks import (
    GoldWriter,
    criterion,
    make_task,
    set_cells,
    step,
)
from atoll_sample._world import WorldDraft
from atoll_sample.sheets import Sheet, write_workbook
from atoll_sample.slides import write_deck

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
    tasks: list[Task] = []

    # 1. Console answer from the spend cube.
    task_id = "keystone-01-packaging-baseline"
    packaging, packaging_savings = by_category["Packaging"], savings_by_category["Packaging"]
    answer = f"Addressable FY2023 packaging spend is ${packaging:,.0f}; at the 6% target that implies ${packaging_savings:,.0f} of savings."
    tasks.append(
        make_task(
            task_id=task_id,
            name="Packaging baseline and savings",
            domain=DOMAIN,
            world_id=world,
            output="message_in_console",
            prompt=(
                "Dmitri wants two numbers before the packaging RFP goes out: Halvorsen's FY2023 addressable Packaging spend "
                "across all six plants, and the savings implied by the current Packaging target in our spend cube "
                "(Data/Raw). Exclude spend flagged as not addressable. Give both figures in USD."
            ),
            rubric=[
                criterion(
                    task_id,
                    1,
                    f"States addressable FY2023 packaging spend of about ${packaging:,.0f}",
                    "final_answer",
                    {"kind": "answer_number", "value": packaging, "rel_tolerance": 0.005},
                ),
                criterion(
                    task_id,
                    2,
                    f"States implied packaging savings of about ${packaging_savings:,.0f} (6% target)",
                    "final_answer",
                    {"kind": "answer_number", "value": round(packaging_savings, 2), "rel_tolerance": 0.005},
                ),
            ],
            steps=[
                step("spreadsheets_read_tab", file_path=files.SPEND_CUBE, tab_index=1),
                step("spreadsheets_read_tab", file_path=files.SPEND_CUBE, tab_index=2),
            ],
            final_answer=answer,
        )
    )

    # 2. Edit the model's assumptions per the CPO's email.
    task_id = "keystone-02-update-targets"
    gold = GoldWriter(benchmark_root, task_id)
    rows = {c: i for i, c in enumerate(rates, start=2)}
    edits = {
        f"B{rows['Logistics']}": 0.09,
        f"C{rows['Logistics']}": "CPO email 27 Feb",
        f"B{rows['MRO']}": 0.08,
        f"C{rows['MRO']}": "CPO email 27 Feb",
    }
    set_cells(gold.edited_copy(draft.fs(files.SPEND_CUBE), files.SPEND_CUBE), "Assumptions", edits)
    tasks.append(
        make_task(
            task_id=task_id,
            name="Update savings targets in the spend cube",
            domain=DOMAIN,
            world_id=world,
            output="edit_existing_sheet",
            prompt=(
                "Dmitri emailed revised category savings targets this week. Update the Assumptions tab of the spend cube "
                "in Data/Raw accordingly (change only the affected categories, and record the source he asked for)."
            ),
            rubric=[
                criterion(
                    task_id,
                    1,
                    "Logistics target savings set to 9%",
                    "file",
                    {
                        "kind": "cell_value",
                        "path": files.SPEND_CUBE,
                        "sheet": "Assumptions",
                        "cell": f"B{rows['Logistics']}",
                        "value": 0.09,
                        "tolerance": 0.0001,
                    },
                    path=files.SPEND_CUBE,
                ),
                criterion(
                    task_id,
                    2,
                    "MRO target savings set to 8%",
                    "file",
                    {
                        "kind": "cell_value",
                        "path": files.SPEND_CUBE,
                        "sheet": "Assumptions",
                        "cell": f"B{rows['MRO']}",
                        "value": 0.08,
                        "tolerance": 0.0001,
                    },
                    path=files.SPEND_CUBE,
                ),
                criterion(
                    task_id,
                    3,
                    "Other category targets are unchanged and the source is recorded as 'CPO email 27 Feb' for the changed rows",
                    "file",
                    path=files.SPEND_CUBE,
                ),
            ],
            steps=[
                step("mail_search_mail", subject="savings targets"),
                step(
                    "spreadsheets_edit_spreadsheet",
                    file_path=files.SPEND_CUBE,
                    operations=[
                        {"type": "set_cell", "sheet": "Assumptions", "cell": cell, "value": value}
                        for cell, value in edits.items()
                    ],
                ),
            ],
            final_answer="Updated the Assumptions tab: Logistics 9% and MRO 8% (source: CPO email 27 Feb).",
            gold_files=[gold.describe(files.SPEND_CUBE, "Spend cube with Logistics 9% and MRO 8%")],
        )
    )

    # 3. New workbook: savings by plant.
    task_id = "keystone-03-savings-by-plant"
    gold = GoldWriter(benchmark_root, task_id)
    plants = {}
    for category, plant, _region, amount, _s, _a in addressable:
        spend_sum, saving = plants.get(plant, (0, 0.0))
        plants[plant] = (spend_sum + amount, saving + amount * rates[category])
    ordered = sorted(plants.items(), key=lambda item: -item[1][1])
    table = [[plant, spend_sum, round(saving, 2)] for plant, (spend_sum, saving) in ordered]
    total_row = len(table) + 2
    output = "/Outputs/Keystone_savings_by_plant.xlsx"
    headers = ["Plant", "Addressable spend (USD)", "Target savings (USD)"]
    write_workbook(
        gold.path(output),
        [
            Sheet(
                "By Plant",
                [headers, *table, ["Total", f"=SUM(B2:B{total_row - 1})", f"=SUM(C2:C{total_row - 1})"]],
                {"B": "#,##0", "C": "#,##0"},
            )
        ],
    )
    tasks.append(
        make_task(
            task_id=task_id,
            name="Savings by plant workbook",
            domain=DOMAIN,
            world_id=world,
            output="make_new_sheet",
            prompt=(
                "Build a new workbook /Outputs/Keystone_savings_by_plant.xlsx with a sheet named 'By Plant': column A Plant, "
                "B Addressable spend (USD), C Target savings (USD), one row per plant starting in row 2, sorted by target "
                "savings descending, and a 'Total' row right after the plants. Use the FY2023 spend cube and the current "
                "category targets in its Assumptions tab; only addressable spend counts."
            ),
            rubric=[
                criterion(
                    task_id,
                    1,
                    "An xlsx workbook was created in /Outputs",
                    "file_type",
                    {"kind": "file_exists", "file_type": "xlsx", "path": "/Outputs/*.xlsx"},
                    file_type="xlsx",
                ),
                criterion(
                    task_id,
                    2,
                    f"The plant with the highest target savings ({ordered[0][0]}) is in row 2",
                    "file",
                    {
                        "kind": "cell_value",
                        "path": output,
                        "sheet": "By Plant",
                        "cell": "A2",
                        "value": ordered[0][0],
                    },
                    path=output,
                ),
                criterion(
                    task_id,
                    3,
                    f"Its target savings are about ${ordered[0][1][1]:,.0f}",
                    "file",
                    {
                        "kind": "cell_value",
                        "path": output,
                        "sheet": "By Plant",
                        "cell": "C2",
                        "value": round(ordered[0][1][1], 2),
                        "tolerance": 1.0,
                    },
                    path=output,
                ),
                criterion(
                    task_id,
                    4,
                    f"The total target savings are about ${total_savings:,.0f}",
                    "file",
                    {
                        "kind": "cell_value",
                        "path": output,
                        "sheet": "By Plant",
                        "cell": f"C{total_row}",
                        "value": round(total_savings, 2),
                        "tolerance": 1.0,
                    },
                    path=output,
                ),
            ],
            steps=[
                step("spreadsheets_read_tab", file_path=files.SPEND_CUBE, tab_index=1),
                step(
                    "spreadsheets_create_spreadsheet",
                    directory="/Outputs",
                    file_name="Keystone_savings_by_plant.xlsx",
                    sheets=[
                        {
                            "name": "By Plant",
                            "headers": headers,
                            "rows": [
                                *table,
                                [
                                    "Total",
                                    round(sum(r[1] for r in table), 2),
                                    round(sum(r[2] for r in table), 2),
                                ],
                            ],
                        }
                    ],
                ),
            ],
            final_answer=f"Created /Outputs/Keystone_savings_by_plant.xlsx; {ordered[0][0]} leads with ${ordered[0][1][1]:,.0f}, total ${total_savings:,.0f}.",
            gold_files=[gold.describe(output, "Savings by plant, sorted, with total")],
        )
    )

    # 4. New SteerCo pre-read deck.
    task_id = "keystone-04-steerco-preread"
    gold = GoldWriter(benchmark_root, task_id)
    output = "/Outputs/Keystone_SteerCo_preread.pptx"
    theme_counts = Counter(issue for _path, issues in files.INTERVIEWS.values() for issue in issues)
    top_theme = theme_counts.most_common(1)[0][0]
    category_rows = [["Category", "Target savings (USD M)"]] + [
        [c, f"{v / 1e6:.2f}"] for c, v in savings_by_category.items()
    ]
    slides = [
        {
            "layout": "title",
            "title": "Project Keystone - SteerCo pre-read",
            "subtitle": f"Halvorsen Foods | next SteerCo {NEXT_STEERCO}",
        },
        {
            "layout": "table",
            "title": f"Target savings by category - total {_money_m(total_savings)}",
            "rows": category_rows,
        },
        {
            "layout": "bullets",
            "title": "What we heard in plant interviews",
            "bullets": [f"{issue} ({n} of 4 plants)" for issue, n in theme_counts.most_common(3)],
        },
    ]
    write_deck(gold.path(output), slides)
    tasks.append(
        make_task(
            task_id=task_id,
            name="SteerCo pre-read deck",
            domain=DOMAIN,
            world_id=world,
            output="make_new_slide_deck",
            prompt=(
                "Create a three-slide SteerCo pre-read at /Outputs/Keystone_SteerCo_preread.pptx: (1) a title slide that "
                "gives the date of the next SteerCo from my calendar (today is March 1, 2024), (2) target savings by "
                "category with the total in USD millions written like $1.2M, using the spend cube as it stands, and (3) the "
                "three most frequent issues from the plant interview notes."
            ),
            rubric=[
                criterion(
                    task_id,
                    1,
                    f"A pptx deck exists in /Outputs showing total target savings of {_money_m(total_savings)}",
                    "file_type",
                    {
                        "kind": "file_exists",
                        "file_type": "pptx",
                        "path": "/Outputs/*.pptx",
                        "contains": [_money_m(total_savings)],
                    },
                    file_type="pptx",
                ),
                criterion(
                    task_id,
                    2,
                    f"The title slide gives the next SteerCo date, {NEXT_STEERCO}",
                    "file_type",
                    file_type="pptx",
                ),
                criterion(
                    task_id,
                    3,
                    f"The interview slide leads with '{top_theme}', raised at {theme_counts[top_theme]} of 4 plants",
                    "file_type",
                    file_type="pptx",
                ),
            ],
            steps=[
                step("calendar_list_events", limit=50),
                step(
                    "presentations_create_deck",
                    directory="/Outputs",
                    file_name="Keystone_SteerCo_preread.pptx",
                    slides=[
                        {"layout": "title", "title": slides[0]["title"], "subtitle": slides[0]["subtitle"]},
                        {
                            "layout": "title_only",
                            "title": slides[1]["title"],
                            "table": {"rows": category_rows},
                        },
                        {
                            "layout": "title_and_content",
                            "title": slides[2]["title"],
                            "bullets": slides[2]["bullets"],
                        },
                    ],
                ),
            ],
            final_answer=f"Created /Outputs/Keystone_SteerCo_preread.pptx (next SteerCo {NEXT_STEERCO}; total {_money_m(total_savings)}).",
            gold_files=[gold.describe(output, "Three-slide pre-read")],
        )
    )

    return tasks
