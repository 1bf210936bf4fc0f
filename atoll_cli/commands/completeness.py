"""The exit status a pipeline can trust: a command that finished but left trials it could not
measure (an infrastructure error, an ungradeable grade, a grade by another judge than the
run's that a regrade has not replaced yet, a trial cancelled with its run) says so on its last line and exits
with :data:`INCOMPLETE_EXIT`, unless the user relaxed it with ``--allow-incomplete``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

#: Exit status of a command that finished with trials in infra_error, ungradeable or cancelled
#: (1: an agent's trajectory ended in error; 2: a user mistake; 130: interrupted).
INCOMPLETE_EXIT = 4
ALLOW_INCOMPLETE_HELP = (
    "exit 0 even when trials end in an infra error, ungradeable or cancelled (default: exit status 4, "
    "named on the last line)"
)


def report_incomplete(report: dict[str, Any]) -> tuple[int, int, int, int]:
    """(trials in infra_error, ungradeable trials, trials graded by another judge than the
    run's, so left out of it: an unfinished regrade, trials cancelled with their run) of a
    report.json document."""
    infra = int((report.get("trials") or {}).get("infra_error", 0))
    cancelled = int((report.get("trials") or {}).get("cancelled", 0))
    ungradeable = sum(
        int((agent.get("outcomes") or {}).get("ungradeable", 0))
        for agent in (report.get("agents") or {}).values()
    )
    gradings = (report.get("judge") or {}).get("gradings") or {}
    other_judges = sum(int(other.get("trials", 0)) for other in gradings.get("other_judges") or [])
    return infra, ungradeable, other_judges, cancelled


def incomplete_line(
    subject: str, infra: int, ungradeable: int, other_judges: int = 0, cancelled: int = 0
) -> str | None:
    """'run demo: incomplete: 2 trials ended in an infra error, 11 trials are ungradeable', or
    None when nothing is missing."""
    parts = []
    if infra:
        parts.append(f"{infra} trial{'s' if infra != 1 else ''} ended in an infra error")
    if ungradeable:
        parts.append(f"{ungradeable} trial{'s are' if ungradeable != 1 else ' is'} ungradeable")
    if other_judges:
        parts.append(
            f"{other_judges} trial{'s are' if other_judges != 1 else ' is'} graded by another judge "
            "than the run's (an unfinished regrade)"
        )
    if cancelled:
        # A run cancelled from the API or `atoll cancel` while `atoll run` ran it: the command
        # stops cleanly, but a pipeline must not read its run as complete.
        parts.append(
            f"{cancelled} trial{'s were' if cancelled != 1 else ' was'} cancelled with the run "
            "(atoll resume RUN makes them pending again)"
        )
    return f"{subject}: incomplete: {', '.join(parts)}" if parts else None


def exit_if_incomplete(
    subject: str, infra: int, ungradeable: int, other_judges: int = 0, cancelled: int = 0, *, allow: bool
) -> None:
    """Print the incomplete line last (stderr) and exit :data:`INCOMPLETE_EXIT`, or, with
    ``allow``, print it and return."""
    line = incomplete_line(subject, infra, ungradeable, other_judges, cancelled)
    if line is None:
        return
    if allow:
        typer.echo(f"{line} (--allow-incomplete: exit status 0)", err=True)
        return
    typer.echo(f"{line}; exit status {INCOMPLETE_EXIT} (--allow-incomplete relaxes it)", err=True)
    raise typer.Exit(INCOMPLETE_EXIT)


def exit_if_run_incomplete(report_json: Path, subject: str, *, allow: bool) -> None:
    """:func:`exit_if_incomplete` for the run whose report.json is ``report_json``."""
    report = json.loads(report_json.read_text(encoding="utf-8"))
    exit_if_incomplete(subject, *report_incomplete(report), allow=allow)
