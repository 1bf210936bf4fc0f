"""Project Atlas (Corvane Industrial acquires Lumen Sensors): the numbers of the financial and
valuation files.

The files themselves are data (``worlds/atlas_financials.yaml``); :func:`compute` draws Lumen's
financials, the comps and the precedents and adds the tables the files show.
"""

from __future__ import annotations

from atoll_sample._world import WorldDraft
from atoll_sample.render import csv_text


def compute(draft: WorldDraft) -> None:
    """Sets facts revenue, EBITDA, comps, precedents, the board multiple and the files' computed
    rows (needs the data's facts)."""
    facts, rng = draft.facts, draft.rng
    revenue = [
        rng.randrange(1400, 1500) * 100,
        rng.randrange(1580, 1680) * 100,
        rng.randrange(1780, 1880) * 100,
    ]
    facts["revenue"] = revenue
    _financials(draft, revenue)
    _comps(draft)
    _precedents(draft)
    facts["board_multiple"] = multiple_text(facts["base_price"] / 1e6, facts["ebitda_adjusted"])
    facts["revenue_m"] = [f"{r / 1000:.1f}" for r in revenue]
    facts["monthly_revenue_rows"] = [[f"2023-{m:02d}", round(revenue[2] / 12)] for m in range(1, 13)]


def _financials(draft: WorldDraft, revenue: list[int]) -> None:
    facts, rng = draft.facts, draft.rng
    cogs = [round(r * rng.uniform(0.55, 0.58)) for r in revenue]
    sga = [round(r * rng.uniform(0.16, 0.18)) for r in revenue]
    rnd = [round(r * rng.uniform(0.085, 0.095)) for r in revenue]
    facts |= {"cogs": cogs, "sga": sga, "rnd": rnd, "dna": [round(r * 0.03) for r in revenue]}
    ebitda = revenue[2] - cogs[2] - sga[2] - rnd[2]
    adjustments = [
        (item["label"], item["amount"] if "amount" in item else rng.randrange(*item["hundreds"]) * 100)
        for item in facts["ebitda_adjustments"]
    ]
    facts["adjustment_rows"] = [[label, amount] for label, amount in adjustments]
    facts["adjustments_end"] = len(adjustments) + 2  # below the header and the reported EBITDA
    facts["adjusted_row"] = len(adjustments) + 3
    facts["ebitda_reported"] = ebitda
    facts["adjustments"] = adjustments
    facts["ebitda_adjusted"] = ebitda + sum(a for _l, a in adjustments)
    facts["cash"] = rng.randrange(180, 260) * 100


def _comps(draft: WorldDraft) -> None:
    rng = draft.rng
    comps, rows = [], []
    for i, name in enumerate(draft.facts["comps_companies"], start=2):
        ebitda = round(rng.uniform(40, 260), 1)
        multiple = rng.uniform(8.0, 14.5)
        net_debt = round(rng.uniform(-50, 300), 1)
        market_cap = round(ebitda * multiple - net_debt, 1)
        revenue = round(ebitda / rng.uniform(0.14, 0.24), 1)
        comps.append((name, market_cap, net_debt, revenue, ebitda))
        rows.append(
            [name, market_cap, net_debt, f"=B{i}+C{i}", revenue, ebitda, f"=D{i}/F{i}", f"=D{i}/E{i}"]
        )
    draft.facts |= {"comps": comps, "comps_rows": rows, "comps_last": len(rows) + 1}
    draft.facts["comps_median_row"] = len(rows) + 2


def _precedents(draft: WorldDraft) -> None:
    """The precedent transactions, and the CSV a task gets them in (no world file)."""
    rng = draft.rng
    precedents, rows = [], []
    for i, (acquirer, target) in enumerate(draft.facts["precedent_deals"]):
        ebitda = round(rng.uniform(12, 60), 1)
        ev = round(ebitda * rng.uniform(9.5, 15.0), 1)
        precedents.append((acquirer, target, ev, ebitda))
        rows.append([f"202{1 + i // 2}-0{1 + i}-15", acquirer, target, ev, ebitda])
    draft.facts["precedents"] = precedents
    draft.facts["precedents_csv"] = csv_text([draft.facts["precedents_header"], *rows])


def multiple_text(price_m: float, ebitda_k: int) -> str:
    """An EV/EBITDA multiple as the board deck writes it (``9.6x``)."""
    return f"{price_m / (ebitda_k / 1000):.1f}x"
