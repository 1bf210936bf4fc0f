"""Project Keystone (Meridian Partners x Halvorsen Foods): the numbers of the engagement files.

The files themselves are data (``worlds/keystone_engagement.yaml``); :func:`compute` draws the
spend and headcount from its facts and adds the tables the files show.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from atoll_sample._world import WorldDraft


@dataclass(frozen=True)
class Savings:
    """The savings model as the spend cube holds it: addressable spend (rows of fact ``spend``
    marked Y) by category, and the target savings at each category's rate."""

    addressable: list[tuple[Any, ...]]
    spend_by_category: dict[str, float]
    by_category: dict[str, float]
    total: float


def savings(facts: dict[str, Any]) -> Savings:
    """The savings model of the world's facts ``spend`` and ``rates`` (what the tasks derive)."""
    spend, rates = facts["spend"], facts["rates"]
    addressable = [row for row in spend if row[5] == "Y"]
    spend_by = {c: sum(row[3] for row in addressable if row[0] == c) for c in rates}
    by_category = {c: spend_by[c] * rates[c] for c in rates}
    return Savings(addressable, spend_by, by_category, sum(by_category.values()))


def money_m(value: float) -> str:
    """Dollars in millions as the deliverables write them ($4.2M)."""
    return f"${value / 1e6:.1f}M"


def compute(draft: WorldDraft) -> None:
    """Sets facts spend, rates, headcount and the files' computed rows (needs the data's facts)."""
    facts, rng = draft.facts, draft.rng
    categories = facts["categories"]
    not_addressable = {tuple(pair) for pair in facts["not_addressable"]}
    spend = []
    for category, terms in categories.items():
        low, high = terms["spend"]
        for plant, region in facts["plants"]:
            amount = rng.randrange(low // 100, high // 100) * 100
            addressable = "N" if (category, plant) in not_addressable else "Y"
            spend.append((category, plant, region, amount, rng.randrange(3, 40), addressable))
    facts["spend"] = spend
    facts["rates"] = rates = {category: terms["rate"] for category, terms in categories.items()}
    facts["headcount"] = _headcount(draft)

    # The spend cube: the Summary sums addressable spend by category from the Spend by Plant tab.
    last = len(spend) + 1
    by_plant = "'Spend by Plant'!"
    summary = [
        [
            category,
            f'=SUMIFS({by_plant}$D$2:$D${last},{by_plant}$A$2:$A${last},A{i},{by_plant}$F$2:$F${last},"Y")',
            f"=Assumptions!B{i}",
            f"=B{i}*C{i}",
        ]
        for i, category in enumerate(categories, start=2)
    ]
    end = len(summary) + 1
    summary.append(["Total", f"=SUM(B2:B{end})", f"=D{end + 1}/B{end + 1}", f"=SUM(D2:D{end})"])
    facts["summary_rows"] = summary
    facts["summary_total_row"] = end + 1
    facts["spend_rows"] = [list(row) for row in spend]
    facts["assumption_rows"] = [[category, rate, facts["rate_source"]] for category, rate in rates.items()]
    facts["eur_row"] = len(categories) + 3  # below the header, the categories and a blank row
    facts["headcount_rows"] = [
        [plant, function, fte, facts["headcount_as_of"]]
        for (plant, function), fte in facts["headcount"].items()
    ]
    totals = {c: sum(row[3] for row in spend if row[0] == c) for c in categories}
    facts["category_spend_rows"] = [[c, f"{v / 1e6:.1f}"] for c, v in totals.items()]
    facts["rate_rows"] = [[c, f"{r:.0%}"] for c, r in rates.items()]
    for interview in facts["interviews"]:
        interview["issue_lines"] = "\n".join(f"- {issue}" for issue in interview["issues"])


def _headcount(draft: WorldDraft) -> dict[tuple[str, str], int]:
    rng = draft.rng
    headcount = {}
    for plant, _region in draft.facts["plants"]:
        for function, base in draft.facts["functions"].items():
            headcount[(plant, function)] = base + rng.randrange(-base // 3, base // 3 + 1)
    # A unique plant with the most procurement staff keeps the "which plant" question well posed.
    top = max(draft.facts["plants"], key=lambda p: headcount[(p[0], "Procurement")])[0]
    headcount[(top, "Procurement")] += 3
    return headcount
