"""Project Keystone tasks on the savings model (Management Consulting), from the world's data;
the tasks themselves are data (``tasks/keystone_model.yaml``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from atoll.benchmark import Task
from atoll_sample._tasks import GoldWriter, set_cells, tasks_from_data
from atoll_sample._world import WorldDraft
from atoll_sample.consulting_files import money_m, savings
from atoll_sample.sheets import Sheet, write_workbook
from atoll_sample.slides import write_deck


def build_tasks(draft: WorldDraft, benchmark_root: Path) -> list[Task]:
    facts = draft.facts
    rates, next_steerco = facts["rates"], facts["next_steerco"]
    model = savings(facts)
    addressable, by_category = model.addressable, model.spend_by_category
    savings_by_category, total_savings = model.by_category, model.total

    packaging_savings = savings_by_category["Packaging"]
    baseline = {
        "packaging": by_category["Packaging"],
        "savings": packaging_savings,
        "savings_value": round(packaging_savings, 2),
    }

    # The model's assumptions edited per the CPO's email.
    task_id = "keystone-02-update-targets"
    rows = {c: i for i, c in enumerate(rates, start=2)}
    source = "CPO email 27 Feb"
    edits = {
        f"B{rows['Logistics']}": 0.09,
        f"C{rows['Logistics']}": source,
        f"B{rows['MRO']}": 0.08,
        f"C{rows['MRO']}": source,
    }
    gold = GoldWriter(benchmark_root, task_id)
    spend_cube = facts["spend_cube"]
    set_cells(gold.edited_copy(draft.fs(spend_cube), spend_cube), "Assumptions", edits)
    targets = {
        "logistics_cell": f"B{rows['Logistics']}",
        "logistics": edits[f"B{rows['Logistics']}"],
        "mro_cell": f"B{rows['MRO']}",
        "mro": edits[f"B{rows['MRO']}"],
        "source": source,
        "operations": [
            {"type": "set_cell", "sheet": "Assumptions", "cell": cell, "value": value}
            for cell, value in edits.items()
        ],
    }

    # A new workbook: savings by plant.
    task_id = "keystone-03-savings-by-plant"
    plants: dict[str, tuple[int, float]] = {}
    for category, plant, _region, amount, _s, _a in addressable:
        spend_sum, saving = plants.get(plant, (0, 0.0))
        plants[plant] = (spend_sum + amount, saving + amount * rates[category])
    ordered = sorted(plants.items(), key=lambda item: -item[1][1])
    table = [[plant, spend_sum, round(saving, 2)] for plant, (spend_sum, saving) in ordered]
    total_row = len(table) + 2
    output = "/Outputs/Keystone_savings_by_plant.xlsx"
    headers = ["Plant", "Addressable spend (USD)", "Target savings (USD)"]
    write_workbook(
        GoldWriter(benchmark_root, task_id).path(output),
        [
            Sheet(
                "By Plant",
                [headers, *table, ["Total", f"=SUM(B2:B{total_row - 1})", f"=SUM(C2:C{total_row - 1})"]],
                {"B": "#,##0", "C": "#,##0"},
            )
        ],
    )
    by_plant = {
        "output": output,
        "top_plant": ordered[0][0],
        "top_savings": ordered[0][1][1],
        "top_savings_value": round(ordered[0][1][1], 2),
        "total": total_savings,
        "total_value": round(total_savings, 2),
        "total_cell": f"C{total_row}",
        "headers": headers,
        "rows": [
            *table,
            ["Total", round(sum(r[1] for r in table), 2), round(sum(r[2] for r in table), 2)],
        ],
    }

    # A new SteerCo pre-read deck.
    task_id = "keystone-04-steerco-preread"
    output = "/Outputs/Keystone_SteerCo_preread.pptx"
    theme_counts = Counter(issue for interview in facts["interviews"] for issue in interview["issues"])
    top_theme = theme_counts.most_common(1)[0][0]
    category_rows = [["Category", "Target savings (USD M)"]] + [
        [c, f"{v / 1e6:.2f}"] for c, v in savings_by_category.items()
    ]
    slides = [
        {
            "layout": "title",
            "title": "Project Keystone - SteerCo pre-read",
            "subtitle": f"Halvorsen Foods | next SteerCo {next_steerco}",
        },
        {
            "layout": "table",
            "title": f"Target savings by category - total {money_m(total_savings)}",
            "rows": category_rows,
        },
        {
            "layout": "bullets",
            "title": "What we heard in plant interviews",
            "bullets": [f"{issue} ({n} of 4 plants)" for issue, n in theme_counts.most_common(3)],
        },
    ]
    write_deck(GoldWriter(benchmark_root, task_id).path(output), slides)
    preread = {
        "output": output,
        "total_m": money_m(total_savings),
        "next_steerco": next_steerco,
        "top_theme": top_theme,
        "top_theme_count": theme_counts[top_theme],
        "slides": [
            {"layout": "title", "title": slides[0]["title"], "subtitle": slides[0]["subtitle"]},
            {"layout": "title_only", "title": slides[1]["title"], "table": {"rows": category_rows}},
            {"layout": "title_and_content", "title": slides[2]["title"], "bullets": slides[2]["bullets"]},
        ],
    }

    values = {
        "keystone-01-packaging-baseline": baseline,
        "keystone-02-update-targets": targets,
        "keystone-03-savings-by-plant": by_plant,
        "keystone-04-steerco-preread": preread,
    }
    shared = {"spend_cube": facts["spend_cube"]}
    return tasks_from_data(
        "keystone_model", draft.world_id, benchmark_root, {k: shared | v for k, v in values.items()}
    )
