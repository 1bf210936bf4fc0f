"""The code server's settings: a server option wins, then ``ATOLL_CODE_<NAME>``, then the default."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

_TRUE = {"1", "true", "yes", "on"}


def setting(options: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """``options[name]``, else the environment variable ``ATOLL_CODE_<NAME>``, else ``default``
    (an empty variable counts as unset)."""
    value = options.get(name)
    if value is None:
        value = os.environ.get(f"ATOLL_CODE_{name.upper()}") or None
    return default if value is None else value


def flag(options: Mapping[str, Any], name: str) -> bool:
    return str(setting(options, name, "")).strip().lower() in _TRUE
