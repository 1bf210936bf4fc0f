"""A world's ``apps`` (APEX ``world_descriptions.json``) mapped onto atoll's MCP servers.

APEX names apps the way its authoring platform did (``{"service_id": "svc_…",
"service_name": "Excel"}``); Archipelago's Harbor export names the servers it configured
(``sheets_server``).  Both are mapped here, by service id first, then by name (case and
spacing ignored).  An app with no atoll server is *unavailable*: its world's tasks are
reported by ``atoll bench load`` and skipped or failed by ``atoll run``, never run silently
without it.
"""

from __future__ import annotations

from typing import Any

# The nine servers every world gets; optional ones are added only for worlds that list them.
DEFAULT_SERVERS: tuple[str, ...] = (
    "mail",
    "calendar",
    "chat",
    "filesystem",
    "code",
    "spreadsheets",
    "documents",
    "pdfs",
    "presentations",
)
OPTIONAL_SERVERS: tuple[str, ...] = ("market_data",)

# Service ids used across Mercor's exports (the same in every world of APEX-Agents v1).
SERVICE_IDS: dict[str, str] = {
    "svc_a3ac7e47956c43048235dbd25d8c849d": "calendar",
    "svc_eec407c6dffc45579b7a4025f8439fe2": "chat",
    "svc_bd6a6280b337424cb5e6e4959301520f": "code",
    "svc_2293fbde36334312996ecfeaca4e978b": "spreadsheets",
    "svc_aba5e37188c745fba2bbd575545a9743": "filesystem",
    "svc_56aff339e48c4f0aaa111988ca7c0b12": "mail",
    "svc_bd0089edc9eb45df9b459b7b9d47f44f": "pdfs",
    "svc_8361cf10b2f84ed78225902d0a6a4255": "presentations",
    "svc_5d56252d4260473284737585ad91eeb3": "documents",
    # Edgar SEC filings and Financial Modeling Prep quotes: served offline by market_data
    # from fixture files the world carries (.apps_data/market_data/).
    "svc_f5802ff259f6474b8f27bd11cd42e4fe": "market_data",
    "svc_0f1a736de09143968916bf5816b9b36c": "market_data",
}

# Service names (folded: lower case, single spaces) and Archipelago's server names.
SERVICE_NAMES: dict[str, str] = {
    "calendar": "calendar",
    "calendar server": "calendar",
    "chat": "chat",
    "chat server": "chat",
    "code execution": "code",
    "code execution server": "code",
    "code": "code",
    "excel": "spreadsheets",
    "spreadsheets": "spreadsheets",
    "sheets": "spreadsheets",
    "sheets server": "spreadsheets",
    "filesystem": "filesystem",
    "file system": "filesystem",
    "filesystem server": "filesystem",
    "mail": "mail",
    "mail server": "mail",
    "pdfs": "pdfs",
    "pdf": "pdfs",
    "pdf server": "pdfs",
    "powerpoint": "presentations",
    "presentations": "presentations",
    "slides": "presentations",
    "slides server": "presentations",
    "word": "documents",
    "documents": "documents",
    "docs": "documents",
    "docs server": "documents",
    "edgar sec": "market_data",
    "edgar": "market_data",
    "fmp": "market_data",
    "fmp server": "market_data",
    "financial modeling prep": "market_data",
    "market data": "market_data",
}


def _fold(name: str) -> str:
    return " ".join(name.casefold().replace("_", " ").replace("-", " ").split())


def app_label(app: Any) -> str:
    """How an app is named in messages: its service name, else its id."""
    if isinstance(app, dict):
        return str(app.get("service_name") or app.get("service_id") or app)
    return str(app)


def server_for(app: Any) -> str | None:
    """atoll's server for one declared app (a ``{service_id, service_name}`` object or a
    name), or None when atoll serves no such app."""
    if isinstance(app, dict):
        by_id = SERVICE_IDS.get(str(app.get("service_id") or ""))
        if by_id:
            return by_id
        app = app.get("service_name") or ""
    return SERVICE_NAMES.get(_fold(str(app)))


def world_apps(world: Any) -> list[Any]:
    """The ``apps`` a World lists (empty when it lists none)."""
    apps = (world.model_extra or {}).get("apps") if hasattr(world, "model_extra") else None
    return list(apps) if isinstance(apps, list) else []


def unavailable_apps(world: Any, *, market_data_files: int = 0) -> dict[str, str]:
    """The apps ``world`` lists that atoll cannot serve, each with the reason.

    ``market_data_files``: how many fixture files the world carries under
    ``.apps_data/market_data/``; without any, the apps market_data stands in for (Edgar SEC,
    FMP) have nothing to answer with and count as unavailable.
    """
    missing: dict[str, str] = {}
    for app in world_apps(world):
        server = server_for(app)
        if server is None:
            missing[app_label(app)] = "atoll has no server for this app"
        elif server == "market_data" and not market_data_files:
            missing[app_label(app)] = (
                "served by market_data from .apps_data/market_data/ fixtures, which this world lacks"
            )
    return missing


def servers_for_world(world: Any) -> tuple[str, ...]:
    """The servers a trial in ``world`` gets: the nine, plus each optional server it lists."""
    wanted = {server_for(app) for app in world_apps(world)}
    return DEFAULT_SERVERS + tuple(name for name in OPTIONAL_SERVERS if name in wanted)
