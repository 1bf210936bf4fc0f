"""Project Atlas market data (served by market_data, standing in for Edgar SEC and FMP) and
the investment-banking task that needs it."""

from __future__ import annotations

import csv
import io
import json
from datetime import date, timedelta
from pathlib import Path

from atoll.benchmark import Task
from atoll_sample._tasks import tasks_from_data
from atoll_sample._world import WorldDraft

SYMBOL = "CRVN"
SHARES_OUTSTANDING = 61_400_000
LAST_CLOSE_DAY = date(2024, 2, 29)  # the last trading day before the world's date (1 March 2024)


def _trading_days(end: date, count: int) -> list[date]:
    days: list[date] = []
    day = end
    while len(days) < count:
        if day.weekday() < 5:
            days.append(day)
        day -= timedelta(days=1)
    return sorted(days)


def build_files(draft: WorldDraft) -> None:
    """quotes, profiles, rates and filings under .apps_data/market_data/."""
    rng = draft.rng
    price = round(rng.uniform(38, 46), 2)
    quotes = io.StringIO()
    writer = csv.writer(quotes, lineterminator="\n")
    writer.writerow(["symbol", "date", "open", "high", "low", "close", "volume", "currency"])
    for day in _trading_days(LAST_CLOSE_DAY, 20):
        opening = price
        price = round(max(10.0, price * (1 + rng.uniform(-0.025, 0.025))), 2)
        high = round(max(opening, price) * (1 + rng.uniform(0, 0.01)), 2)
        low = round(min(opening, price) * (1 - rng.uniform(0, 0.01)), 2)
        writer.writerow(
            [SYMBOL, day.isoformat(), opening, high, low, price, rng.randrange(200_000, 900_000), "USD"]
        )
    draft.facts["crvn_close"] = price
    draft.apps("market_data/quotes.csv").write_text(quotes.getvalue(), encoding="utf-8")
    draft.apps("market_data/profiles.csv").write_text(
        "symbol,name,exchange,sector,industry,currency,shares_outstanding\n"
        f"{SYMBOL},Corvane Industrial Inc.,NYSE,Industrials,Industrial Automation,USD,{SHARES_OUTSTANDING}\n",
        encoding="utf-8",
    )
    rates = [
        {
            "series": "UST10Y",
            "date": day.isoformat(),
            "value": round(4.1 + rng.uniform(-0.15, 0.15), 3),
            "unit": "percent",
        }
        for day in _trading_days(LAST_CLOSE_DAY, 5)
    ]
    draft.apps("market_data/rates.json").write_text(json.dumps(rates, indent=2) + "\n", encoding="utf-8")
    filings = [
        {
            "filing_id": "0001387131-24-000009",
            "symbol": SYMBOL,
            "company": "Corvane Industrial Inc.",
            "form": "10-K",
            "filed": "2024-02-16",
            "period": "2023-12-31",
            "title": "Annual report for fiscal year 2023",
            "text": (
                "Corvane Industrial Inc. designs and manufactures industrial automation systems. "
                f"As of February 9, 2024, {SHARES_OUTSTANDING:,} shares of common stock were outstanding. "
                "Liquidity: cash and equivalents of $212.4 million and an undrawn $300 million revolving facility."
            ),
            "financials": {"cash_and_equivalents_usd_m": 212.4, "revolver_undrawn_usd_m": 300.0},
        }
    ]
    draft.apps("market_data/filings.json").write_text(json.dumps(filings, indent=2) + "\n", encoding="utf-8")


def build_tasks(draft: WorldDraft, benchmark_root: Path) -> list[Task]:
    """atlas-09 (``tasks/atlas_market.yaml``): the revised offer against Corvane's market value."""
    close = draft.facts["crvn_close"]
    market_cap_m = close * SHARES_OUTSTANDING / 1e6
    share = draft.facts["revised_price"] / 1e6 / market_cap_m * 100
    values = {
        "symbol": SYMBOL,
        "shares": SHARES_OUTSTANDING,
        "close": close,
        "market_cap_m": market_cap_m,
        "market_cap_value": round(market_cap_m, 2),
        "share": share,
        "share_value": round(share, 2),
    }
    return tasks_from_data(
        "atlas_market", draft.world_id, benchmark_root, {"atlas-09-offer-vs-market-cap": values}
    )
