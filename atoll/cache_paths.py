"""Where atoll keeps what it may rebuild or replay: one cache folder, one resolver.

``cache_root()`` is ``$ATOLL_CACHE_DIR``, else ``$XDG_CACHE_HOME/atoll``, else
``~/.cache/atoll``; each user of it has a subfolder named for what it holds, and may have a
variable of its own that points elsewhere (read here, so the order is the same for all):

| subfolder | what | its own variable |
|---|---|---|
| ``hf-overlays`` | task overlays from the Hugging Face cache (:mod:`atoll.hf_cache`) | – |
| ``tool-schemas`` | our tools' JSON schemas (:mod:`mcp_servers._core.schema_cache`) | ``ATOLL_SCHEMA_CACHE`` |
| ``spool`` | a worker's results waiting for the store (:mod:`orchestrator.spool`) | ``ATOLL_SPOOL_DIR`` |
"""

from __future__ import annotations

import os
from pathlib import Path

from atoll.settings import variable

__all__ = ["cache_path", "cache_root"]


def cache_root() -> Path:
    """atoll's cache folder, as the environment says now (see the module doc)."""
    configured = (variable("ATOLL_CACHE_DIR") or "").strip()
    if configured:
        return Path(configured).expanduser()
    base = (variable("XDG_CACHE_HOME") or "").strip()
    # XDG: a relative XDG_CACHE_HOME is invalid and ignored.
    if not base or not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "atoll"


def cache_path(name: str, override_env: str | None = None) -> Path:
    """The folder ``name`` under :func:`cache_root`, or ``$override_env`` when that is set."""
    if override_env:
        configured = (variable(override_env) or "").strip()
        if configured:
            return Path(configured).expanduser()
    return cache_root() / name
