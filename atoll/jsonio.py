"""Strict JSON: what atoll writes or serves holds no NaN and no ±Infinity.

Python's ``json`` writes ``NaN`` and ``Infinity`` by default, which is not JSON: Node's
``JSON.parse``, browsers, ``jq`` and Python's own strict mode refuse the file. atoll's
convention (docs/orchestrator.md, "Strict JSON") is that an undefined value is ``null`` and the
object holding it says why in an ``"undefined": {field: reason}`` map.

Every JSON writer goes through :func:`dumps_strict` (plain data) or :func:`model_json`
(a pydantic model), so a non-finite number that slips in fails loudly where it is written,
naming where it sits, instead of being written as ``NaN`` (``json``) or silently as ``null``
(pydantic's ``model_dump_json``, which would leave a required number unreadable later).
Reading stays lenient: ``json.loads`` and pydantic accept ``NaN`` in records written before.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from atoll.errors import CodedError, ErrorCode

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["NonFiniteNumber", "dumps_strict", "loads_strict", "model_json", "nonfinite_paths"]


class NonFiniteNumber(CodedError, ValueError):
    """A NaN or ±Infinity was about to be written as JSON (our bug: undefined values are null)."""

    code = ErrorCode.non_finite_number


def nonfinite_paths(value: Any, path: str = "$") -> Iterator[tuple[str, float]]:
    """Every NaN or ±Infinity inside ``value`` (dicts, lists, tuples), as (JSONPath-like path, number)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from nonfinite_paths(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from nonfinite_paths(item, f"{path}[{index}]")


def dumps_strict(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)`` that refuses NaN and ±Infinity.

    Raises :class:`NonFiniteNumber` naming the first such number's path (e.g.
    ``$.metrics.overall.oracle.pass_at_1.value``); other errors are ``json.dumps``'s own."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError as exc:
        found = next(nonfinite_paths(value), None)
        if found is None:  # not ours: a circular reference or a default() that raised
            raise
        where, number = found
        raise NonFiniteNumber(f"{where} is {number}, which JSON cannot hold: write null and say why") from exc


def model_json(model: BaseModel, *, indent: int | None = None, by_alias: bool = False) -> str:
    """The model as strict JSON, as ``model_dump_json`` would write it (UTF-8 text, compact
    without ``indent``), but a NaN or ±Infinity raises :class:`NonFiniteNumber` instead of
    becoming ``null``."""
    data = model.model_dump(mode="json", by_alias=by_alias)
    separators = (",", ":") if indent is None else (",", ": ")
    return dumps_strict(data, indent=indent, separators=separators, ensure_ascii=False)


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON (strict parsing)")


def loads_strict(text: str | bytes) -> Any:
    """``json.loads`` that refuses ``NaN``, ``Infinity`` and ``-Infinity``, as Node's
    ``JSON.parse`` does. Raises ValueError naming the constant."""
    return json.loads(text, parse_constant=_refuse_constant)
