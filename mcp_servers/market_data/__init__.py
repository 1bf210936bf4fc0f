"""Market data server: quotes, rates, company profiles and filings served offline from the
fixture files a world carries under ``.apps_data/market_data/`` (CSV or JSON; the format is
in docs/mcp_servers.md). Stands in for APEX's Edgar SEC and FMP apps. Optional: started
only for worlds that list one of those apps. Consolidated tool: ``market_data(action=…)``."""

from mcp_servers.market_data import tools  # noqa: F401  (registers the tools)
from mcp_servers.market_data.server import SERVER

__all__ = ["SERVER"]
