"""Programmatic checks (``Criterion.check``): deterministic verdicts from the answer and the diff.

Each check returns a ``CheckResult``: ``passed`` True/False with a reason, or ``passed`` None
when the check could not be evaluated (a workbook that cannot be opened), which makes the
criterion ungradeable rather than failed.

Every kind of the ``atoll.benchmark.Check`` union has exactly one evaluator, registered with
``@check("kind")`` in :data:`CHECKS` (an :class:`atoll.registry.Registry`); adding a check kind
is its model in ``atoll/benchmark.py`` (a member of the union) plus one decorated function here
(tests/grader/test_check_registry.py fails otherwise). A package may add the evaluator of a kind
of its own through an ``atoll.checks`` entry point. An evaluator takes ``(check, inputs:
CheckInputs)``.
"""

from __future__ import annotations

import io
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import parseaddr
from typing import Any, TypeVar

import regex

from atoll.benchmark import (
    AnswerNumberCheck,
    AnswerRegexCheck,
    CellValueCheck,
    ChatPostedCheck,
    Check,
    CoworkerContactedCheck,
    EmailSentCheck,
    EventCreatedCheck,
    FileExistsCheck,
)
from atoll.errors import ErrorCode
from atoll.registry import Registry, UnknownName
from grader.diff import WorldDiff
from grader.extract import ExtractOptions, extension, extract
from grader.snapshot import FS_PREFIX, virtual_path


@dataclass
class CheckResult:
    passed: bool | None
    reason: str


@dataclass(frozen=True)
class CheckInputs:
    """What an evaluator may look at: the agent's final answer and the world's diff."""

    answer: str
    world: WorldDiff
    options: ExtractOptions = field(default_factory=ExtractOptions)


class UnknownCheckKind(UnknownName):
    """A check whose kind has no evaluator: a bug in atoll (a ``Check`` member without its
    ``@check`` function), reported as an error rather than an ungradeable criterion."""


Evaluator = Callable[[Any, CheckInputs], CheckResult]
_E = TypeVar("_E", bound=Evaluator)

CHECKS: Registry[Evaluator] = Registry(
    "check kind",
    group="atoll.checks",
    unknown_code=ErrorCode.unknown_check_kind,
    unavailable_code=ErrorCode.check_kind_unavailable,
    unknown_message="no evaluator for {kind} {name!r} (known: {known})",
    unknown_error=UnknownCheckKind,
)


def check(kind: str) -> Callable[[_E], _E]:
    """Register the decorated function as the evaluator of check kind ``kind``; a kind with
    two evaluators raises ValueError."""
    return CHECKS.register(kind)


def evaluator_kinds() -> frozenset[str]:
    """The check kinds that have an evaluator (built in, or an ``atoll.checks`` entry point)."""
    return frozenset(CHECKS.names())


# --- numbers -------------------------------------------------------------------------------

_NUMBER = re.compile(
    r"(?:(?<![\w.])(?P<neg>[-−(]))?\s*(?:[$€£¥]\s*)?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"\s*(?P<suffix>%|percent\b|bn\b|billion\b|mn\b|million\b|thousand\b|[kKmMbB]\b)?"
)
_SCALE = {"k": 1e3, "thousand": 1e3, "m": 1e6, "mn": 1e6, "million": 1e6, "b": 1e9, "bn": 1e9, "billion": 1e9}


def numbers_in(text: str) -> list[float]:
    """Every number written in ``text``, normalised: separators, currency, %, k/m/bn suffixes.

    A percentage yields both its written value and its fraction (``12%`` -> 12 and 0.12); a
    scaled number both its full and its written value (``3.2k`` -> 3200 and 3.2).
    """
    found: list[float] = []
    for match in _NUMBER.finditer(text):
        value = float(match.group("num").replace(",", ""))
        if match.group("neg"):
            value = -value
        suffix = (match.group("suffix") or "").lower()
        if suffix in ("%", "percent"):
            found.extend([value, value / 100])
        elif suffix in _SCALE:
            # "$336M" may be compared with 336 (a value in millions) or 336,000,000.
            found.extend([value * _SCALE[suffix], value])
        else:
            found.append(value)
    return found


def _close(actual: float, expected: float, tolerance: float, rel_tolerance: float) -> bool:
    allowed = max(tolerance, rel_tolerance * abs(expected), 1e-9 * max(1.0, abs(expected)))
    return abs(actual - expected) <= allowed


@check("answer_number")
def answer_number(check: AnswerNumberCheck, inputs: CheckInputs) -> CheckResult:
    answer = inputs.answer
    candidates = numbers_in(answer)
    for number in candidates:
        if _close(number, check.value, check.tolerance, check.rel_tolerance):
            return CheckResult(True, f"the answer contains {number:g}, within tolerance of {check.value:g}")
    if not candidates:
        return CheckResult(False, "the final answer contains no number")
    return CheckResult(False, f"no number in the answer is within tolerance of {check.value:g}")


#: Longest a task's pattern may take on an answer or on a check's file paths. The pattern is
#: the task's (any published dataset, any /grade caller) and the text the agent's: a pattern
#: that backtracks catastrophically (``^(a|aa)+$`` on forty ``a``) would hold a grading thread
#: for ever. The ``regex`` module takes a timeout (and releases the GIL while it matches).
PATTERN_TIMEOUT_S = 1.0


@check("answer_regex")
def answer_regex(check: AnswerRegexCheck, inputs: CheckInputs) -> CheckResult:
    answer = inputs.answer
    flags = 0 if check.case_sensitive else regex.IGNORECASE
    try:
        pattern = regex.compile(check.pattern, flags)
    except regex.error as exc:
        return CheckResult(None, f"invalid pattern {check.pattern!r}: {exc}")
    try:
        found = pattern.search(answer, timeout=PATTERN_TIMEOUT_S, concurrent=True)
    except TimeoutError:
        return CheckResult(
            None, f"pattern {check.pattern!r} took more than {PATTERN_TIMEOUT_S:g} s on the final answer"
        )
    if found:
        return CheckResult(True, f"the final answer matches /{check.pattern}/")
    return CheckResult(False, f"the final answer does not match /{check.pattern}/")


# --- files ---------------------------------------------------------------------------------


def glob_regex(pattern: str) -> regex.Pattern[str]:
    """``**`` matches across folders, ``*`` and ``?`` within one; patterns are anchored at ``/``."""
    if not pattern.startswith("/"):
        pattern = "/" + pattern
    out = []
    index = 0
    while index < len(pattern):
        if pattern.startswith("/**/", index):
            out.append("/(?:.*/)?")
            index += 4
        elif pattern.startswith("**", index):
            out.append(".*")
            index += 2
        elif pattern[index] == "*":
            out.append("[^/]*")
            index += 1
        elif pattern[index] == "?":
            out.append("[^/]")
            index += 1
        else:
            out.append(re.escape(pattern[index]))
            index += 1
    return regex.compile("^" + "".join(out) + "$", regex.IGNORECASE)


def _matching_files(world: WorldDiff, pattern: str, file_type: str | None) -> list[str]:
    """The final world's files matching the glob ``pattern`` (and ``file_type``); raises
    TimeoutError (the check is then unevaluable) when matching takes over PATTERN_TIMEOUT_S."""
    compiled = glob_regex(pattern)
    wanted = (file_type or "").lower().lstrip(".")
    deadline = time.monotonic() + PATTERN_TIMEOUT_S
    found = []
    for path in world.after.filesystem_paths():
        if wanted and extension(path) != wanted:
            continue
        left = max(deadline - time.monotonic(), 0.001)
        if compiled.match(virtual_path(path), timeout=left, concurrent=True):
            found.append(path)
    return found


def _read_bounded(
    world: WorldDiff, paths: list[str], options: ExtractOptions
) -> tuple[dict[str, bytes], list[str]]:
    """The contents of ``paths`` within the extraction caps (each file at most
    ``max_file_bytes``, all together ``max_total_bytes``), and one line per file left unread:
    the files a check matches are the agent's, and would otherwise all be held at once."""
    wanted: list[str] = []
    unread: list[str] = []
    total = 0
    for path in paths:
        size = world.after.entries[path].size if path in world.after.entries else 0
        if size > options.max_file_bytes:
            unread.append(f"{virtual_path(path)}: {size} bytes exceeds the {options.max_file_bytes}-byte cap")
        elif total + size > options.max_total_bytes:
            unread.append(f"{virtual_path(path)}: past the {options.max_total_bytes}-byte total cap")
        else:
            total += size
            wanted.append(path)
    return world.after.read_many(wanted), unread


@check("file_exists")
def file_exists(check: FileExistsCheck, inputs: CheckInputs) -> CheckResult:
    world, options = inputs.world, inputs.options
    paths = _matching_files(world, check.path, check.file_type)
    if check.changed:
        touched = {c.path for c in world.changes.files if c.change in ("created", "modified")}
        paths = [p for p in paths if p in touched]
    what = f"{'created or modified ' if check.changed else ''}.{check.file_type} file matching {check.path}"
    if not paths:
        return CheckResult(False, f"no {what}")
    if not check.contains:
        return CheckResult(True, f"found {virtual_path(paths[0])}")
    contents, failures = _read_bounded(world, paths, options)
    for path in paths:
        if path not in contents:
            continue
        extracted = extract(virtual_path(path), contents.get(path, b""), options)
        if extracted.error:
            failures.append(f"{virtual_path(path)}: {extracted.error}")
            continue
        text = extracted.text().lower()
        missing = [s for s in check.contains if s.lower() not in text]
        if not missing:
            return CheckResult(True, f"{virtual_path(path)} contains {check.contains}")
    if failures and len(failures) == len(paths):
        return CheckResult(None, "could not extract: " + "; ".join(failures))
    return CheckResult(False, f"no {what} contains all of {check.contains}")


def _normalise_cell(value: object) -> str:
    return str(value).strip().lower()


@check("cell_value")
def cell_value(check: CellValueCheck, inputs: CheckInputs) -> CheckResult:
    world, options = inputs.world, inputs.options
    from atoll.formats.libreoffice import with_computed_values
    from atoll.formats.xlsx import XlsxReader, column_number

    paths = [p for p in _matching_files(world, check.path, None) if extension(p) in ("xlsx", "xlsm")]
    if not paths:
        return CheckResult(False, f"no workbook matches {check.path}")
    reference = re.fullmatch(r"\$?([A-Za-z]{1,3})\$?([0-9]{1,7})", check.cell.strip())
    if reference is None:
        return CheckResult(None, f"cell: {check.cell!r} is not a cell reference like B7")
    row, col = int(reference.group(2)), column_number(reference.group(1).upper())
    contents, failures = _read_bounded(world, paths, options)
    seen: list[str] = []
    for path in paths:
        if path not in contents:
            continue
        # The spreadsheet tools' reader: the check sees the value read_tab shows.
        try:
            data = (
                with_computed_values(contents[path], name=virtual_path(path))
                if options.recalculate
                else contents[path]
            )
            with XlsxReader(io.BytesIO(data), name=virtual_path(path)) as reader:
                names = [sheet.name for sheet in reader.sheets]
                if not names:
                    seen.append(f"{virtual_path(path)} has no sheet")
                    continue
                if check.sheet is None:
                    sheet = reader.sheets[0]
                elif check.sheet in names:
                    sheet = reader.sheets[names.index(check.sheet)]
                else:
                    lowered = [name.lower() for name in names]
                    if check.sheet.lower() not in lowered:
                        seen.append(f"{virtual_path(path)} has no sheet {check.sheet!r}")
                        continue
                    sheet = reader.sheets[lowered.index(check.sheet.lower())]
                found = next(iter(reader.cells(sheet, row, col, row, col)), None)
        except Exception as exc:  # noqa: BLE001 - untrusted workbook
            failures.append(f"{virtual_path(path)}: {type(exc).__name__}: {exc}")
            continue
        actual = found.value if found is not None else None
        if _cell_matches(actual, check):
            return CheckResult(True, f"{virtual_path(path)} {sheet.name}!{check.cell} = {actual!r}")
        seen.append(f"{virtual_path(path)} {sheet.name}!{check.cell} = {actual!r}")
    if failures and not seen:
        return CheckResult(None, "could not open: " + "; ".join(failures))
    return CheckResult(False, f"expected {check.value!r}; found " + "; ".join(seen or failures))


def _cell_matches(actual: object, check: CellValueCheck) -> bool:
    if actual is None:
        return False
    if isinstance(check.value, int | float) and not isinstance(check.value, bool):
        number: float | None = None
        if isinstance(actual, int | float) and not isinstance(actual, bool):
            number = float(actual)
        elif isinstance(actual, str):
            values = numbers_in(actual)
            number = values[0] if values else None
        return number is not None and _close(number, float(check.value), check.tolerance, 0.0)
    return _normalise_cell(actual) == _normalise_cell(check.value)


# --- app data ------------------------------------------------------------------------------


def _address(value: str) -> str:
    return parseaddr(value)[1].lower() or value.strip().lower()


@check("email_sent")
def email_sent(check: EmailSentCheck, inputs: CheckInputs) -> CheckResult:
    world = inputs.world
    wanted = {_address(a) for a in check.to}
    if not world.changes.mails_sent:
        return CheckResult(False, "no mail was sent")
    for mail in world.changes.mails_sent:
        recipients = {_address(a) for a in mail.to + mail.cc}
        if not wanted <= recipients:
            continue
        if check.subject_contains and check.subject_contains.lower() not in mail.subject.lower():
            continue
        body = mail.body.lower()
        if any(s.lower() not in body for s in check.body_contains):
            continue
        if check.attachment_type:
            suffix = "." + check.attachment_type.lower().lstrip(".")
            if not any(name.lower().endswith(suffix) for name in mail.attachments):
                continue
        return CheckResult(True, f"mail {mail.subject!r} sent to {', '.join(mail.to + mail.cc)}")
    return CheckResult(False, f"none of {len(world.changes.mails_sent)} mail(s) sent matches the check")


@check("event_created")
def event_created(check: EventCreatedCheck, inputs: CheckInputs) -> CheckResult:
    world = inputs.world
    created = [e for e in world.changes.events if e.change == "created"]
    if not created:
        return CheckResult(False, "no calendar event was created")
    wanted = {_address(a) for a in check.attendees}
    for event in created:
        if check.summary_contains.lower() not in event.summary.lower():
            continue
        if check.date and not (event.start or "").startswith(check.date):
            continue
        if not wanted <= {_address(a) for a in event.attendees}:
            continue
        return CheckResult(True, f"event {event.summary!r} created at {event.start}")
    return CheckResult(False, f"none of {len(created)} created event(s) matches the check")


@check("chat_posted")
def chat_posted(check: ChatPostedCheck, inputs: CheckInputs) -> CheckResult:
    world = inputs.world
    posts = [c for c in world.changes.chat if c.change in ("posted", "replied")]
    if not posts:
        return CheckResult(False, "no chat message was posted")
    for post in posts:
        if check.channel:
            channel = check.channel.lower()
            names = {
                post.channel_id.lower(),
                post.channel_name.lower(),
                post.channel_id.split(" ", 1)[-1].lower(),
            }
            if channel not in names:
                continue
        text = post.text.lower()
        if all(s.lower() in text for s in check.contains):
            return CheckResult(True, f"message {post.change} in {post.channel_name or post.channel_id}")
    return CheckResult(False, f"none of {len(posts)} chat message(s) matches the check")


@check("coworker_contacted")
def coworker_contacted(check: CoworkerContactedCheck, inputs: CheckInputs) -> CheckResult:
    exchanges = inputs.world.changes.coworkers
    wanted = check.persona.strip().lower()
    theirs = [e for e in exchanges if wanted in (e.persona.lower(), e.persona_email.lower())]
    if not theirs:
        return CheckResult(False, f"no message of the agent reached persona {check.persona!r}")
    for exchange in theirs:
        if check.channel and exchange.channel != check.channel:
            continue
        text = exchange.message.lower()
        if all(s.lower() in text for s in check.contains):
            return CheckResult(True, f"the agent wrote to {exchange.persona} by {exchange.channel}")
    return CheckResult(False, f"none of {len(theirs)} message(s) to {check.persona} matches the check")


def run_check(
    spec: Check, answer: str, world: WorldDiff, options: ExtractOptions | None = None
) -> CheckResult:
    """Evaluate one check; a failure inside an evaluator becomes an unevaluable result, never an
    exception. Raises :class:`UnknownCheckKind` for a kind without an evaluator."""
    evaluator = CHECKS.get(str(getattr(spec, "kind", spec)))
    try:
        return evaluator(spec, CheckInputs(answer, world, options or ExtractOptions()))
    except Exception as exc:  # noqa: BLE001 - a check must never abort the grade
        return CheckResult(None, f"check {spec.kind} failed: {type(exc).__name__}: {exc}")


__all__ = [
    "FS_PREFIX",
    "CHECKS",
    "CheckInputs",
    "CheckResult",
    "UnknownCheckKind",
    "check",
    "evaluator_kinds",
    "glob_regex",
    "numbers_in",
    "run_check",
]
