"""The market_data server's definition (tools register themselves on import)."""

from mcp_servers._core import ServerDefinition
from mcp_servers.market_data.data import MarketData

SERVER = ServerDefinition(
    "market_data",
    consolidated_name="market_data",
    state=MarketData,
    description=(
        "Read-only market data of the world, as of the world's date: share prices (quotes and "
        "history), interest and FX rates, company profiles and SEC filings. It stands in for "
        "the Edgar SEC and FMP (Financial Modeling Prep) apps; it has no live feed."
    ),
)
