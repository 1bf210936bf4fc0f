"""market_data tools: quotes, price history, rates, company profiles and SEC filings."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from atoll.errors import ErrorCode
from mcp_servers._core import ToolError
from mcp_servers.market_data.data import DATASETS, MarketData
from mcp_servers.market_data.server import SERVER


class Quote(BaseModel):
    symbol: str
    date: str
    close: float
    open: float | None = None
    high: float | None = None
    low: float | None = None
    volume: float | None = None
    currency: str | None = None


class PriceHistory(BaseModel):
    symbol: str
    quotes: list[Quote]
    total: int


class Rate(BaseModel):
    series: str
    date: str
    value: float
    unit: str | None = None
    description: str | None = None


class RateSeries(BaseModel):
    series: list[str]


class Profile(BaseModel, extra="allow"):
    symbol: str
    name: str


class FilingSummary(BaseModel):
    filing_id: str
    symbol: str
    form: str
    filed: str
    period: str | None = None
    company: str | None = None
    title: str | None = None
    url: str | None = None


class FilingList(BaseModel):
    filings: list[FilingSummary]
    total: int


class Filing(FilingSummary):
    text: str
    offset: int
    total_chars: int
    next_offset: int | None = None
    financials: dict[str, Any] | None = None


class Coverage(BaseModel):
    symbols: list[str]
    rate_series: list[str]
    filings: int
    datasets: list[str]


def _symbol(value: str) -> str:
    text = value.strip().upper()
    if not text:
        raise ToolError(ErrorCode.invalid_argument, "symbol: must not be empty", argument="symbol")
    return text


def _on_or_before(rows: list[dict[str, Any]], when: str | None) -> list[dict[str, Any]]:
    return [row for row in rows if when is None or row["date"] <= when]


def _date_argument(value: str | None, argument: str) -> str | None:
    from datetime import date

    if value is None:
        return None
    try:
        return date.fromisoformat(value.strip()[:10]).isoformat()
    except ValueError:
        raise ToolError(
            ErrorCode.invalid_argument, f"{argument}: {value!r} is not a YYYY-MM-DD date", argument=argument
        ) from None


def _quotes_of(data: MarketData, symbol: str) -> list[dict[str, Any]]:
    rows = [row for row in data.rows("quotes") if row["symbol"] == symbol]
    if not rows:
        known = sorted({row["symbol"] for row in data.rows("quotes")})
        raise ToolError(
            ErrorCode.not_found,
            f"symbol: no quotes for {symbol!r} (covered: {', '.join(known) or 'none'})",
            argument="symbol",
        )
    return sorted(rows, key=lambda row: row["date"])


def _quote(row: dict[str, Any]) -> Quote:
    return Quote.model_validate({k: row.get(k) for k in Quote.model_fields})


@SERVER.tool(action="quote", read_only=True)
def get_quote(data: MarketData, symbol: str, date: str | None = None) -> Quote:
    """The latest quote of a share on or before a date (default: the latest there is).

    Args:
        symbol: ticker, e.g. "AAPL".
        date: YYYY-MM-DD; the quote of that day or the last trading day before it.
    """
    symbol = _symbol(symbol)
    when = _date_argument(date, "date")
    rows = _on_or_before(_quotes_of(data, symbol), when)
    if not rows:
        raise ToolError(
            ErrorCode.not_found, f"date: no quote for {symbol} on or before {when}", argument="date"
        )
    return _quote(rows[-1])


@SERVER.tool(action="history", read_only=True)
def get_price_history(
    data: MarketData,
    symbol: str,
    start_date: str | None = None,
    end_date: str | None = None,
    limit: Annotated[int, Field(ge=1, le=1000)] = 100,
) -> PriceHistory:
    """Daily quotes of a share between two dates, oldest first (at most limit of them).

    Args:
        symbol: ticker, e.g. "AAPL".
        start_date: first day, YYYY-MM-DD (default: the first there is).
        end_date: last day, YYYY-MM-DD (default: the last there is).
        limit: most quotes returned (1-1000); the latest ones are kept.
    """
    symbol = _symbol(symbol)
    start, end = _date_argument(start_date, "start_date"), _date_argument(end_date, "end_date")
    rows = [
        r
        for r in _quotes_of(data, symbol)
        if (start is None or r["date"] >= start) and (end is None or r["date"] <= end)
    ]
    return PriceHistory(symbol=symbol, quotes=[_quote(r) for r in rows[-limit:]], total=len(rows))


@SERVER.tool(action="rate", read_only=True)
def get_rate(data: MarketData, series: str, date: str | None = None) -> Rate:
    """The value of a rate series (interest rate, FX rate, index) on or before a date.

    Args:
        series: series name as list_rate_series gives it, e.g. "UST10Y" or "EURUSD".
        date: YYYY-MM-DD; the value of that day or the last one before it.
    """
    when = _date_argument(date, "date")
    rows = sorted(
        (r for r in data.rows("rates") if str(r["series"]).casefold() == series.strip().casefold()),
        key=lambda r: r["date"],
    )
    if not rows:
        raise ToolError(
            ErrorCode.not_found, f"series: no rate series {series!r}; see list_rate_series", argument="series"
        )
    rows = _on_or_before(rows, when)
    if not rows:
        raise ToolError(ErrorCode.not_found, f"date: no {series} value on or before {when}", argument="date")
    return Rate.model_validate({k: rows[-1].get(k) for k in Rate.model_fields})


@SERVER.tool(action="list_rates", read_only=True)
def list_rate_series(data: MarketData) -> RateSeries:
    """The names of the rate series the world has."""
    return RateSeries(series=sorted({str(r["series"]) for r in data.rows("rates")}))


@SERVER.tool(action="profile", read_only=True)
def get_company_profile(data: MarketData, symbol: str) -> Profile:
    """A company's profile: name, exchange, sector, shares outstanding, market cap, ….

    Args:
        symbol: ticker, e.g. "AAPL".
    """
    symbol = _symbol(symbol)
    for row in data.rows("profiles"):
        if row["symbol"] == symbol:
            return Profile.model_validate(row)
    raise ToolError(ErrorCode.not_found, f"symbol: no profile for {symbol!r}", argument="symbol")


def _filing_id(row: dict[str, Any]) -> str:
    return str(row.get("filing_id") or f"{row['symbol']}-{row['form']}-{row['filed']}")


def _summary(row: dict[str, Any]) -> FilingSummary:
    values = {k: row.get(k) for k in FilingSummary.model_fields}
    values["filing_id"] = _filing_id(row)
    return FilingSummary.model_validate(values)


@SERVER.tool(action="search_filings", read_only=True)
def search_filings(
    data: MarketData,
    symbol: str | None = None,
    form: str | None = None,
    after_date: str | None = None,
    before_date: str | None = None,
    query: str | None = None,
    limit: Annotated[int, Field(ge=1, le=100)] = 20,
) -> FilingList:
    """SEC filings (10-K, 10-Q, 8-K, S-4, …), newest first, filtered by company, form, date
    and words in their title or text.

    Args:
        symbol: ticker of the filer.
        form: form type, e.g. "10-K" (case-insensitive).
        after_date: filed on or after, YYYY-MM-DD.
        before_date: filed on or before, YYYY-MM-DD.
        query: words that must all occur in the title or text (case-insensitive).
        limit: most filings returned (1-100).
    """
    after, before = _date_argument(after_date, "after_date"), _date_argument(before_date, "before_date")
    words = (query or "").casefold().split()
    chosen = []
    for row in data.rows("filings"):
        if symbol and row["symbol"] != _symbol(symbol):
            continue
        if form and str(row["form"]).casefold() != form.strip().casefold():
            continue
        if (after and row["filed"] < after) or (before and row["filed"] > before):
            continue
        if words:
            haystack = f"{row.get('title') or ''} {data.filing_text(row)}".casefold()
            if not all(word in haystack for word in words):
                continue
        chosen.append(row)
    chosen.sort(key=lambda row: (row["filed"], _filing_id(row)), reverse=True)
    return FilingList(filings=[_summary(row) for row in chosen[:limit]], total=len(chosen))


@SERVER.tool(action="read_filing", read_only=True)
def read_filing(
    data: MarketData,
    filing_id: str,
    offset: Annotated[int, Field(ge=0)] = 0,
    max_chars: Annotated[int, Field(ge=1, le=200_000)] = 20_000,
) -> Filing:
    """A filing's text (max_chars at a time from offset) and its financial data.

    Args:
        filing_id: id as search_filings gives it.
        offset: first character to return.
        max_chars: most characters returned (1-200000); next_offset says where to continue.
    """
    for row in data.rows("filings"):
        if _filing_id(row) == filing_id.strip():
            text = data.filing_text(row)
            part = text[offset : offset + max_chars]
            end = offset + len(part)
            financials = row.get("financials") if isinstance(row.get("financials"), dict) else None
            return Filing(
                **_summary(row).model_dump(),
                text=part,
                offset=offset,
                total_chars=len(text),
                next_offset=end if end < len(text) else None,
                financials=financials,
            )
    raise ToolError(
        ErrorCode.not_found, f"filing_id: no filing {filing_id!r}; see search_filings", argument="filing_id"
    )


@SERVER.tool(action="coverage", read_only=True)
def list_coverage(data: MarketData) -> Coverage:
    """What the world's market data covers: symbols with quotes or profiles, rate series, and
    the number of filings."""
    symbols = {r["symbol"] for r in data.rows("quotes")} | {r["symbol"] for r in data.rows("profiles")}
    return Coverage(
        symbols=sorted(symbols),
        rate_series=sorted({str(r["series"]) for r in data.rows("rates")}),
        filings=len(data.rows("filings")),
        datasets=[name for name in DATASETS if data.rows(name)],
    )
