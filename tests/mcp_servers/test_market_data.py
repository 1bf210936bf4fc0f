"""market_data: quotes, rates, profiles and filings from a world's fixture files."""

from __future__ import annotations

import json
import os

import pytest

from tests.mcp_servers.helpers import make_world, open_session

QUOTES = "symbol,date,open,high,low,close,volume,currency\n" + "\n".join(
    [
        "LUMN,2024-02-28,11.0,11.4,10.9,11.2,1000,USD",
        "LUMN,2024-02-29,11.2,12.6,11.1,12.5,1500,USD",
        "LUMN,2024-03-04,12.5,12.9,12.0,12.1,900,USD",
        "CRVN,2024-02-29,40,41,39,40.5,300,USD",
    ]
)
RATES = [
    {"series": "UST10Y", "date": "2024-02-29", "value": 4.25, "unit": "percent"},
    {"series": "UST10Y", "date": "2024-03-04", "value": 4.19, "unit": "percent"},
    {"series": "EURUSD", "date": "2024-02-29", "value": 1.08},
]
FILINGS = [
    {
        "filing_id": "0001-24-000012",
        "symbol": "LUMN",
        "form": "10-K",
        "filed": "2024-02-20",
        "period": "2023-12-31",
        "title": "Annual report 2023",
        "text": "Revenue was $412.0 million. " * 3,
        "financials": {"revenue": 412.0, "ebitda": 61.8},
    },
    {
        "symbol": "LUMN",
        "form": "8-K",
        "filed": "2024-03-01",
        "title": "CEO transition",
        "text_file": "lumn-8k.txt",
    },
]


@pytest.fixture()
def world(tmp_path):
    world = make_world(tmp_path)
    world.app_file("market_data/quotes.csv", QUOTES)
    world.app_file("market_data/rates.json", json.dumps(RATES))
    world.app_file(
        "market_data/profiles.csv",
        "symbol,name,sector,shares_outstanding\nLUMN,Lumen Sensors,Tech,48000000\n",
    )
    world.app_file("market_data/filings.json", json.dumps(FILINGS))
    world.app_file("market_data/lumn-8k.txt", "The board appointed a new chief executive.")
    return world


def test_quote_on_or_before_a_date(world):
    with open_session("market_data", world) as mcp:
        latest = mcp.call("get_quote", {"symbol": "lumn"}).structured_content
        weekend = mcp.call("get_quote", {"symbol": "LUMN", "date": "2024-03-02"}).structured_content
        history = mcp.call(
            "get_price_history", {"symbol": "LUMN", "start_date": "2024-02-29"}
        ).structured_content
    assert (latest["date"], latest["close"]) == ("2024-03-04", 12.1)
    assert (weekend["date"], weekend["close"]) == ("2024-02-29", 12.5)
    assert [q["date"] for q in history["quotes"]] == ["2024-02-29", "2024-03-04"]


def test_rates_profiles_and_coverage(world):
    with open_session("market_data", world) as mcp:
        rate = mcp.call("get_rate", {"series": "ust10y", "date": "2024-03-01"}).structured_content
        series = mcp.call("list_rate_series", {}).structured_content
        profile = mcp.call("get_company_profile", {"symbol": "LUMN"}).structured_content
        coverage = mcp.call("list_coverage", {}).structured_content
    assert (rate["value"], rate["unit"]) == (4.25, "percent")
    assert series["series"] == ["EURUSD", "UST10Y"]
    assert profile["name"] == "Lumen Sensors" and profile["shares_outstanding"] == 48_000_000
    assert coverage["symbols"] == ["CRVN", "LUMN"] and coverage["filings"] == 2


def test_filings_search_and_read_in_pages(world):
    with open_session("market_data", world) as mcp:
        found = mcp.call("search_filings", {"symbol": "LUMN"}).structured_content
        by_text = mcp.call("search_filings", {"query": "chief executive"}).structured_content
        page = mcp.call("read_filing", {"filing_id": "0001-24-000012", "max_chars": 20}).structured_content
    with open_session("market_data", world, mode="consolidated") as mcp:
        consolidated = mcp.call("market_data", {"action": "read_filing", "filing_id": "LUMN-8-K-2024-03-01"})
    assert [f["form"] for f in found["filings"]] == ["8-K", "10-K"]  # newest first
    assert [f["filing_id"] for f in by_text["filings"]] == ["LUMN-8-K-2024-03-01"]
    assert page["text"] == "Revenue was $412.0 m" and page["next_offset"] == 20
    assert page["financials"] == {"revenue": 412.0, "ebitda": 61.8}
    assert "new chief executive" in consolidated.structured_content["text"]


def test_unknown_items_and_bad_rows_are_named(world):
    world.app_file("market_data/rates.json", json.dumps([{"series": "X", "date": "yesterday", "value": 1}]))
    with open_session("market_data", world) as mcp:
        missing = mcp.call("get_quote", {"symbol": "NOPE"})
        bad = mcp.call("get_rate", {"series": "X"})
    assert missing.is_error and "no quotes for 'NOPE' (covered: CRVN, LUMN)" in missing.content[0].text
    assert (
        bad.is_error and "rates.json row 1 date: 'yesterday' is not a YYYY-MM-DD date" in bad.content[0].text
    )


def test_fixture_symlinks_are_not_followed(world, tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text("symbol,date,close\nSECRET,2024-01-01,1\n")
    (world.apps_root / "market_data" / "quotes.csv").unlink()
    os.symlink(secret, world.apps_root / "market_data" / "quotes.csv")
    world.app_file("market_data/filings.json", json.dumps([{**FILINGS[1], "text_file": "../../secret.csv"}]))
    with open_session("market_data", world) as mcp:
        quote = mcp.call("get_quote", {"symbol": "SECRET"})
        filing = mcp.call("read_filing", {"filing_id": "LUMN-8-K-2024-03-01"})
    assert quote.is_error and "quotes.csv: cannot be read" in quote.content[0].text
    assert filing.is_error and "must be a plain file name" in filing.content[0].text


def test_a_world_without_fixtures_says_so(tmp_path):
    with open_session("market_data", make_world(tmp_path)) as mcp:
        result = mcp.call("get_quote", {"symbol": "LUMN"})
    assert result.is_error and "covered: none" in result.content[0].text
