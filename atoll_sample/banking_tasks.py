"""Project Atlas tasks in Investment Banking: answers computed from the world's own data; the
tasks themselves are data (``tasks/atlas_banking.yaml``)."""

from __future__ import annotations

import statistics
from pathlib import Path

from atoll.benchmark import Task
from atoll_sample import deal_files as files
from atoll_sample._tasks import GoldWriter, replace_in_deck, tasks_from_data
from atoll_sample._world import WorldDraft
from atoll_sample.sheets import Sheet, write_workbook


def build_tasks(draft: WorldDraft, benchmark_root: Path) -> list[Task]:
    facts = draft.facts
    ebitda_m = facts["ebitda_adjusted"] / 1000
    comp_multiples = [(cap + debt) / ebitda for _n, cap, debt, _rev, ebitda in facts["comps"]]
    precedent_multiples = [ev / ebitda for _a, _t, ev, ebitda in facts["precedents"]]
    shared = {"comps": facts["comps_workbook"], "financials": facts["financials"], "ebitda_m": ebitda_m}

    median = statistics.median(comp_multiples)
    implied = median * ebitda_m
    comps_implied_ev = {
        "median": median,
        "implied": implied,
        "median_value": round(median, 3),
        "implied_value": round(implied, 2),
    }

    # The football field workbook, with precedents from the task's own input file.
    task_id = "atlas-02-football-field"
    overlay = benchmark_root / "task_files" / task_id / "filesystem" / facts["precedents_input"].lstrip("/")
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
    formats = {"B": '0.0"x"', "C": '0.0"x"', "D": "#,##0.0", "E": "#,##0.0"}
    write_workbook(
        GoldWriter(benchmark_root, task_id).path(output), [Sheet("Football Field", [headers, *rows], formats)]
    )
    football_field = {
        "output": output,
        "precedents_input": facts["precedents_input"],
        "headers": headers,
        "rows": rows,
        "comps_low": rows[0][3],
        "comps_high": rows[0][4],
        "precedents_low": rows[1][3],
        "precedents_high": rows[1][4],
    }

    # The board deck at the revised offer.
    task_id = "atlas-03-board-deck-offer"
    offer = "$435M"
    multiple = files.multiple_text(facts["revised_price"] / 1e6, facts["ebitda_adjusted"])
    replacements = {"$410M": offer, facts["board_multiple"]: multiple}
    deck = facts["board_deck"]
    replace_in_deck(GoldWriter(benchmark_root, task_id).edited_copy(draft.fs(deck), deck), replacements)
    board_deck = {
        "deck": deck,
        "offer": offer,
        "multiple": multiple,
        "operations": [
            {"type": "replace_text", "slide_index": None, "search": old, "replace": new}
            for old, new in replacements.items()
        ],
    }

    values = {
        "atlas-01-comps-implied-ev": comps_implied_ev,
        "atlas-02-football-field": football_field,
        "atlas-03-board-deck-offer": board_deck,
    }
    return tasks_from_data(
        "atlas_banking", draft.world_id, benchmark_root, {k: shared | v for k, v in values.items()}
    )
