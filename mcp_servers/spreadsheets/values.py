"""How cell values are shown to agents and taken from them.

- dates and times read as ISO text (:func:`atoll.formats.xlsx.display`, which the grader
  uses too);
- a Google Sheets export formula ``=IFERROR(__xludf.DUMMYFUNCTION("…"), fallback)`` reads
  as its fallback when no computed value exists (Google's own functions do not exist in
  LibreOffice or Excel);
- a formula whose value could not be computed reads as ``#NOT_COMPUTED: <reason>``.
"""

from __future__ import annotations

import re

from atoll.formats.xlsx import Scalar

NOT_COMPUTED = "#NOT_COMPUTED"
DUMMY_FUNCTION = "__xludf.DUMMYFUNCTION"


def not_computed(reason: str) -> str:
    return f"{NOT_COMPUTED}: {reason}"


def _top_level_arguments(text: str) -> list[str]:
    """Split a function's argument list at top-level commas (quotes and brackets respected)."""
    parts: list[str] = []
    depth = 0
    quoted = False
    current: list[str] = []
    for ch in text:
        if ch == '"':
            quoted = not quoted
        elif not quoted:
            if ch in "({":
                depth += 1
            elif ch in ")}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append("".join(current).strip())
                current = []
                continue
        current.append(ch)
    parts.append("".join(current).strip())
    return parts


def dummy_function_fallback(formula: str) -> tuple[bool, Scalar]:
    """(True, fallback) for ``=IFERROR(__xludf.DUMMYFUNCTION(...), fallback)``, else (False, None)."""
    body = formula.strip()
    if DUMMY_FUNCTION.lower() not in body.lower():
        return False, None
    match = re.match(r"^=?\s*IFERROR\s*\((.*)\)\s*$", body, re.IGNORECASE | re.DOTALL)
    if not match:
        return False, None
    arguments = _top_level_arguments(match.group(1))
    if len(arguments) != 2 or DUMMY_FUNCTION.lower() not in arguments[0].lower():
        return False, None
    return True, _literal(arguments[1])


def _literal(text: str) -> Scalar:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1].replace('""', '"')
    upper = text.upper()
    if upper in ("TRUE", "FALSE"):
        return upper == "TRUE"
    try:
        number = float(text)
    except ValueError:
        return text
    return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
