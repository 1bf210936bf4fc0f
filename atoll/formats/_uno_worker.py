"""Recalculation worker run by a Python that has LibreOffice's ``uno`` module.

Standalone on purpose (stdlib + ``uno`` only): it is executed as a script by the system
Python (Debian ``python3-uno``), not imported by the server. Protocol, one JSON object per
line: the first line on stdout is ``{"ready": true}`` once connected to the soffice given
by ``--pipe``; then for each request ``{"id": N, "path": "/scratch/x.xlsx"}`` on stdin it
answers ``{"id": N, "sheets": [[name, [[row, col, kind, value], ...]], ...]}`` with the computed
value of every formula cell (rows/cols 1-based; kind ``n`` number, ``s`` text, ``b``
boolean, ``e`` error) or ``{"id": N, "error": "..."}``.
"""

import contextlib
import json
import re
import sys
import time

import uno  # noqa: F401  (installs the com.sun.star importer)
from com.sun.star.beans import PropertyValue

FORMULA_CELLS = 16  # com.sun.star.sheet.CellFlags.FORMULA
ERROR_RESULTS = 4  # com.sun.star.sheet.FormulaResult.ERROR
MAX_BOOLEAN_PROBES = 5000
_LOGICAL_CALL = re.compile(r"^=?\s*(TRUE|FALSE|AND|OR|NOT|XOR|IS[A-Z]+|EXACT)\s*\(", re.IGNORECASE)


def _may_be_logical(formula):
    """Whether a formula's result is probably a logical value: a comparison at the top level
    (outside parentheses and strings) or a logical function call. Only such cells are asked
    for their shown text (one UNO round trip each), which keeps the common case fast."""
    if _LOGICAL_CALL.match(formula):
        return True
    depth = 0
    quoted = False
    for ch in formula[1:] if formula.startswith("=") else formula:
        if ch == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and ch in "<>=":
            return True
    return False


def _property(name, value):
    prop = PropertyValue()
    prop.Name = name
    prop.Value = value
    return prop


def _connect(pipe, timeout_s):
    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            context = resolver.resolve(f"uno:pipe,name={pipe};urp;StarOffice.ComponentContext")
            return context.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", context)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _sheet_values(sheet):
    cells = []
    booleans = []
    for address in sheet.queryContentCells(FORMULA_CELLS).getRangeAddresses():
        block = sheet.getCellRangeByPosition(
            address.StartColumn, address.StartRow, address.EndColumn, address.EndRow
        )
        data = block.getDataArray()
        formulas = block.getFormulaArray()
        for dr, row in enumerate(data):
            for dc, value in enumerate(row):
                r, c = address.StartRow + dr, address.StartColumn + dc
                if isinstance(value, str):
                    cells.append([r + 1, c + 1, "s", value])
                else:
                    cells.append([r + 1, c + 1, "n", value])
                    if value in (0.0, 1.0) and _may_be_logical(formulas[dr][dc] or ""):
                        booleans.append(len(cells) - 1)
    index = {(r, c): i for i, (r, c, _, _) in enumerate(cells)}
    for address in sheet.queryFormulaCells(ERROR_RESULTS).getRangeAddresses():
        for r in range(address.StartRow, address.EndRow + 1):
            for c in range(address.StartColumn, address.EndColumn + 1):
                i = index.get((r + 1, c + 1))
                if i is not None:
                    cells[i][2:] = ["e", sheet.getCellByPosition(c, r).getString()]
    for i in booleans[:MAX_BOOLEAN_PROBES]:
        r, c, kind, _ = cells[i]
        if kind != "n":
            continue
        shown = sheet.getCellByPosition(c - 1, r - 1).getString()
        if shown in ("TRUE", "FALSE"):
            cells[i][2:] = ["b", shown == "TRUE"]
    return cells


def _compute(desktop, path):
    url = uno.systemPathToFileUrl(path)
    # Untrusted files: never run macros, never update links to other files or sites.
    arguments = (
        _property("Hidden", True),
        _property("MacroExecutionMode", 0),  # com.sun.star.document.MacroExecMode.NEVER_EXECUTE
        _property("UpdateDocMode", 0),  # com.sun.star.document.UpdateDocMode.NO_UPDATE
        _property("ReadOnly", True),
    )
    document = desktop.loadComponentFromURL(url, "_blank", 0, arguments)
    if document is None:
        raise RuntimeError("LibreOffice could not open the workbook")
    try:
        document.calculateAll()
        return [[sheet.Name, _sheet_values(sheet)] for sheet in document.Sheets]
    finally:
        document.close(True)


def main():
    pipe = sys.argv[sys.argv.index("--pipe") + 1]
    timeout_s = float(sys.argv[sys.argv.index("--connect-timeout") + 1])
    desktop = _connect(pipe, timeout_s)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = {"id": request["id"], "sheets": _compute(desktop, request["path"])}
        except Exception as exc:
            detail = getattr(exc, "Message", "") or str(exc)
            reply = {"id": request["id"], "error": f"{type(exc).__name__}: {detail}"[:300]}
        print(json.dumps(reply), flush=True)
    # stdin closed: the server stopped (or died); take soffice down with us.
    with contextlib.suppress(Exception):
        desktop.terminate()


if __name__ == "__main__":
    main()
