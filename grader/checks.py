"""Programmatic checks (``Criterion.check``): deterministic verdicts from the answer and the diff.

Each check returns a ``CheckResult``: ``passed`` True/False with a reason, or ``passed`` None
when the check could not be evaluated (a workbook that cannot be opened), which makes the
criterion ungradeable rather than failed.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from email.utils import parseaddr

from atoll.benchmark import (
    AnswerNumberCheck,
    AnswerRegexCheck,
    CellValueCheck,
    ChatPostedCheck,
    EmailSentCheck,
    EventCreatedCheck,
    FileExistsCheck,
)
from grader.diff import WorldDiff
from grader.extract import ExtractOptions, extension, extract
from grader.snapshot import FS_PREFIX, virtual_path


@dataclass
class CheckResult:
    passed: bool | None
    reason: str


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


def answer_number(check: AnswerNumberCheck, answer: str) -> CheckResult:
    candidates = numbers_in(answer)
    for number in candidates:
        if _close(number, check.value, check.tolerance, check.rel_tolerance):
            return CheckResult(True, f"the answer contains {number:g}, within tolerance of {check.value:g}")
    if not candidates:
        return CheckResult(False, "the final answer contains no number")
    return CheckResult(False, f"no number in the answer is within tolerance of {check.value:g}")


def answer_regex(check: AnswerRegexCheck, answer: str) -> CheckResult:
    flags = 0 if check.case_sensitive else re.IGNORECASE
    try:
        pattern = re.compile(check.pattern, flags)
    except re.error as exc:
        return CheckResult(None, f"invalid pattern {check.pattern!r}: {exc}")
    if pattern.search(answer):
        return CheckResult(True, f"the final answer matches /{check.pattern}/")
    return CheckResult(False, f"the final answer does not match /{check.pattern}/")


# --- files ---------------------------------------------------------------------------------


def glob_regex(pattern: str) -> re.Pattern[str]:
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
    return re.compile("^" + "".join(out) + "$", re.IGNORECASE)


def _matching_files(world: WorldDiff, pattern: str, file_type: str | None) -> list[str]:
    regex = glob_regex(pattern)
    wanted = (file_type or "").lower().lstrip(".")
    return [
        path
        for path in world.after.filesystem_paths()
        if regex.match(virtual_path(path)) and (not wanted or extension(path) == wanted)
    ]


def file_exists(check: FileExistsCheck, world: WorldDiff, options: ExtractOptions) -> CheckResult:
    paths = _matching_files(world, check.path, check.file_type)
    if check.changed:
        touched = {c.path for c in world.changes.files if c.change in ("created", "modified")}
        paths = [p for p in paths if p in touched]
    what = f"{'created or modified ' if check.changed else ''}.{check.file_type} file matching {check.path}"
    if not paths:
        return CheckResult(False, f"no {what}")
    if not check.contains:
        return CheckResult(True, f"found {virtual_path(paths[0])}")
    contents = world.after.read_many(paths)
    failures: list[str] = []
    for path in paths:
        extracted = extract(path, contents.get(path, b""), options)
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


def cell_value(check: CellValueCheck, world: WorldDiff, options: ExtractOptions) -> CheckResult:
    from openpyxl import load_workbook

    from atoll.formats.libreoffice import with_computed_values

    paths = [p for p in _matching_files(world, check.path, None) if extension(p) in ("xlsx", "xlsm")]
    if not paths:
        return CheckResult(False, f"no workbook matches {check.path}")
    contents = world.after.read_many(paths)
    seen: list[str] = []
    failures: list[str] = []
    for path in paths:
        try:
            data = with_computed_values(contents[path]) if options.recalculate else contents[path]
            workbook = load_workbook(io.BytesIO(data), data_only=True, read_only=True)
        except Exception as exc:  # noqa: BLE001 - untrusted workbook
            failures.append(f"{virtual_path(path)}: {type(exc).__name__}: {exc}")
            continue
        try:
            if check.sheet is None:
                sheet = workbook.worksheets[0]
            elif check.sheet in workbook.sheetnames:
                sheet = workbook[check.sheet]
            else:
                lowered = {name.lower(): name for name in workbook.sheetnames}
                if check.sheet.lower() not in lowered:
                    seen.append(f"{virtual_path(path)} has no sheet {check.sheet!r}")
                    continue
                sheet = workbook[lowered[check.sheet.lower()]]
            actual = sheet[check.cell].value
        finally:
            workbook.close()
        if _cell_matches(actual, check):
            return CheckResult(True, f"{virtual_path(path)} {sheet.title}!{check.cell} = {actual!r}")
        seen.append(f"{virtual_path(path)} {sheet.title}!{check.cell} = {actual!r}")
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


def email_sent(check: EmailSentCheck, world: WorldDiff) -> CheckResult:
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


def event_created(check: EventCreatedCheck, world: WorldDiff) -> CheckResult:
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


def chat_posted(check: ChatPostedCheck, world: WorldDiff) -> CheckResult:
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


def run_check(check, answer: str, world: WorldDiff, options: ExtractOptions | None = None) -> CheckResult:
    """Evaluate one check; an unexpected failure becomes an unevaluable result, never an exception."""
    options = options or ExtractOptions()
    try:
        match check:
            case AnswerNumberCheck():
                return answer_number(check, answer)
            case AnswerRegexCheck():
                return answer_regex(check, answer)
            case CellValueCheck():
                return cell_value(check, world, options)
            case FileExistsCheck():
                return file_exists(check, world, options)
            case EmailSentCheck():
                return email_sent(check, world)
            case EventCreatedCheck():
                return event_created(check, world)
            case ChatPostedCheck():
                return chat_posted(check, world)
    except Exception as exc:  # noqa: BLE001 - a check must never abort the grade
        return CheckResult(None, f"check {check.kind} failed: {type(exc).__name__}: {exc}")
    return CheckResult(None, f"unknown check kind {getattr(check, 'kind', check)!r}")


__all__ = ["FS_PREFIX", "CheckResult", "glob_regex", "numbers_in", "run_check"]
