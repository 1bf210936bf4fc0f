"""The mail server's state: every ``.mbox`` under ``<apps_data>/mail``, indexed and cached.

Each file's index is cached by file identity (:class:`FileCache`), so a call re-reads
nothing unless a file changed; the merged, sorted view over all files is cached by the
identity of the per-file indexes. Our own appends update the cached index in place of a
re-parse; anything else that changes a file (a populate) makes it re-indexed on next use.
"""

from __future__ import annotations

import logging
import mmap
import threading
from bisect import bisect_right
from dataclasses import dataclass, field
from email.message import Message
from functools import cached_property
from pathlib import Path

from atoll.errors import ErrorCode
from atoll.formats.mail.headers import bare_addresses, normalize_id, parse_header_block, split_header
from atoll.formats.mail.index import (
    MailEntry,
    MailIndex,
    Problem,
    build_index,
    involves,
    make_entry,
    synthetic_id,
)
from atoll.formats.mail.mbox import StaleSpan, append_message, message_bytes, read_span, render_message
from atoll.formats.mail.text import search_text
from mcp_servers._core import FileCache, FileStamp, OutsideRoot, ServerContext, ToolError, file_lock
from mcp_servers._core.app_data import AppData

logger = logging.getLogger("mcp_servers.mail")

DEFAULT_SENT_MBOX = "Sent.mbox"


@dataclass
class MailView:
    """All messages of all mbox files: newest first, deduplicated by Message-ID."""

    entries: list[MailEntry]
    by_key: dict[str, MailEntry]
    by_key_lower: dict[str, MailEntry]
    indexes: list[MailIndex]
    _fields: dict[str, tuple[str, list[int]]] = field(default_factory=dict, repr=False)

    def find(self, mail_id: str) -> MailEntry | None:
        key = normalize_id(mail_id)
        return self.by_key.get(key) or self.by_key_lower.get(key.lower())

    @cached_property
    def positions(self) -> dict[tuple[Path, int], int]:
        """(file, span start) -> position in ``entries``."""
        return {(entry.file, entry.span.start): number for number, entry in enumerate(self.entries)}

    def keys_of(self, keys: set[tuple[Path, int]]) -> set[int]:
        """Positions in ``entries`` of these (file, span start) keys."""
        positions = self.positions
        return {positions[k] for k in keys if k in positions}

    def field_matches(self, field_name: str, needle: str) -> set[int]:
        """Positions of the entries whose lower-cased ``field_name`` (``subject_l``,
        ``sender_l``, ``recipients_l``) contains ``needle``.

        The field of all entries is joined once per view into one string, so a search is a
        few C-level ``find`` calls, not a Python loop over 10,000 messages.
        """
        blob, starts = self._joined(field_name)
        found: set[int] = set()
        position = blob.find(needle)
        while position >= 0:
            number = bisect_right(starts, position) - 1
            found.add(number)
            following = starts[number + 1] if number + 1 < len(starts) else len(blob)
            position = blob.find(needle, following)
        return found

    def _joined(self, field_name: str) -> tuple[str, list[int]]:
        joined = self._fields.get(field_name)
        if joined is None:
            values = [getattr(entry, field_name).replace("\x00", " ") for entry in self.entries]
            starts, position = [], 0
            for value in values:
                starts.append(position)
                position += len(value) + 1
            joined = ("\x00".join(values), starts)
            self._fields[field_name] = joined
        return joined

    @property
    def problems(self) -> list[Problem]:
        return [problem for index in self.indexes for problem in index.problems]


_ID_FIELD = frozenset({"message-id"})


def _is_message(entry: MailEntry, raw: bytes) -> bool:
    """Whether ``raw`` is the message ``entry`` indexed (its Message-ID, or its synthetic id)."""
    fields, _ = parse_header_block(split_header(raw)[0], _ID_FIELD)
    found = normalize_id(fields.get("message-id"))
    if found:
        return found == entry.key
    return synthetic_id(raw) == entry.key


def _sort_key(entry: MailEntry) -> tuple[bool, float, int]:
    return (entry.date is not None, entry.date.timestamp() if entry.date else 0.0, entry.order)


class MailStore:
    """Reads and appends the world's mailboxes. Thread-safe."""

    def __init__(self, context: ServerContext) -> None:
        self.ctx = context
        self.data = AppData(context.apps_data_root, "mail")
        self.root = self.data.folder
        self._cache: FileCache[MailIndex] = FileCache(self._load, stamp=self.data.stamp)
        self._lock = threading.Lock()
        self._view: tuple[tuple[int, ...], MailView] | None = None
        self._reported: set[Problem] = set()
        self._pending: list[Problem] = []
        self._names: dict[Path, str] = {}

    # --- reading ---------------------------------------------------------------------

    def display_name(self, path: Path) -> str:
        """The mbox's name relative to the mail folder (e.g. ``Archive/old.mbox``)."""
        name = self._names.get(path)
        if name is None:
            try:
                name = path.relative_to(self.root).as_posix()
            except ValueError:
                name = path.name
            self._names[path] = name
        return name

    def _load(self, path: Path) -> MailIndex:
        return build_index(self.data.open(path), path, self.display_name(path))

    def mbox_files(self) -> list[tuple[Path, FileStamp]]:
        """Every ``*.mbox`` regular file under the mail folder, sorted, with its stamp; walked
        and opened beneath the app-data root's descriptor, so links out of the app data
        (the mail folder itself included) are ignored."""
        return self.data.files(".mbox")

    def warm(self) -> None:
        """Index every mailbox now (run in the background after a populate; see
        :func:`mcp_servers._core.build.server_warmer`)."""
        self.view()

    def view(self) -> MailView:
        """The current merged view (rebuilt only when some file changed)."""
        indexes = []
        for path, stamp in self.mbox_files():
            try:
                indexes.append(self._cache.get(path, stamp=stamp))
            except FileNotFoundError:  # removed between listing and reading
                continue
            except OSError as exc:  # unreadable: serve the others, report this one
                self._unreadable(path, exc)
        key = tuple(id(index) for index in indexes)
        with self._lock:
            if self._view is not None and self._view[0] == key:
                return self._view[1]
        by_key: dict[str, MailEntry] = {}
        for index in indexes:
            for entry in index.entries:
                by_key.setdefault(entry.key, entry)
        entries = sorted(by_key.values(), key=_sort_key, reverse=True)
        view = MailView(entries, by_key, {k.lower(): e for k, e in reversed(by_key.items())}, indexes)
        with self._lock:
            self._view = (key, view)
        return view

    def _unreadable(self, path: Path, exc: OSError) -> None:
        problem = Problem(self.display_name(path), 0, 0, f"cannot be read ({exc.strerror or exc}); skipped")
        with self._lock:
            if problem not in self._reported and problem not in self._pending:
                self._pending.append(problem)

    def notices(self, view: MailView) -> list[str]:
        """Problems in the stored mail not reported before (each is reported once)."""
        fresh = []
        with self._lock:
            pending, self._pending = self._pending, []
            for problem in [*pending, *view.problems]:
                if problem not in self._reported:
                    self._reported.add(problem)
                    fresh.append(problem)
        for problem in fresh:
            logger.warning("mail: %s", problem.text())
        return [problem.text() for problem in fresh]

    def get(self, view: MailView, mail_id: str, argument: str = "mail_id") -> MailEntry:
        entry = view.find(mail_id)
        if entry is None:
            raise ToolError(
                ErrorCode.not_found, f"{argument}: no message with id {mail_id[:120]!r}", argument=argument
            )
        return entry

    def raw(self, entry: MailEntry) -> bytes:
        """The stored bytes of a message. If the mbox was replaced since it was indexed (a
        populate), the file is re-indexed and the message looked up again by its id."""
        try:
            raw = read_span(self.data.open(entry.file), entry.span, entry.file.name)
            if not _is_message(entry, raw):
                raise StaleSpan(entry.mail_id)
            return raw
        except StaleSpan:
            self._cache.invalidate(entry.file)
            fresh = self.view().find(entry.key)
            if fresh is None:
                raise ToolError(
                    ErrorCode.not_found, f"message {entry.mail_id} is no longer in the mailbox"
                ) from None
            try:
                return read_span(self.data.open(fresh.file), fresh.span, fresh.file.name)
            except (StaleSpan, OSError):
                raise ToolError(ErrorCode.conflict, "the mailbox is being rewritten; retry") from None
        except OSError as exc:
            raise ToolError(
                ErrorCode.conflict, f"the mailbox changed while reading ({exc.strerror}); retry"
            ) from None

    def body_lower(self, entry: MailEntry, index: MailIndex) -> str:
        """Lower-cased body text for searching (parsed once per file version)."""
        text = index.bodies.get(entry.span.start)
        if text is None:
            try:
                text = search_text(self.raw(entry)).lower()
            except ToolError:
                text = ""
            index.bodies[entry.span.start] = text
        return text

    def body_matches(self, view: MailView, needle: str) -> set[tuple[Path, int]]:
        """(file, span start) of every message whose body contains ``needle`` (lower-case).

        Bodies of a file version are extracted once and joined into one byte string, so a
        search is a few C-level ``find`` calls instead of a loop over messages.
        """
        found: set[tuple[Path, int]] = set()
        for index in view.indexes:
            blob, starts = self._body_blob(index)
            encoded = needle.encode("utf-8", "replace")
            position = blob.find(encoded)
            while position >= 0:
                number = bisect_right(starts, position) - 1
                found.add((index.path, index.entries[number].span.start))
                following = starts[number + 1] if number + 1 < len(starts) else len(blob)
                position = blob.find(encoded, following)
        return found

    def _body_blob(self, index: MailIndex) -> tuple[bytes, list[int]]:
        if index.body_blob is None:
            parts: list[bytes] = []
            starts: list[int] = []
            position = 0
            missing = [entry for entry in index.entries if entry.span.start not in index.bodies]
            if missing:  # one pass over the file instead of one open per message
                try:
                    with (
                        self.data.open(index.path) as handle,
                        mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data,
                    ):
                        for entry in missing:
                            raw = message_bytes(data[entry.span.start : entry.span.end])
                            index.bodies[entry.span.start] = search_text(raw).lower() if raw else ""
                except (OSError, ValueError):  # unreadable or emptied meanwhile: search what we have
                    pass
            for entry in index.entries:
                text = self.body_lower(entry, index).replace("\x00", " ").encode("utf-8", "replace")
                starts.append(position)
                parts.append(text)
                position += len(text) + 1
            # UTF-8 bytes: find() on bytes is a fast memchr-based scan whatever the text.
            index.body_blob = (b"\x00".join(parts), starts)
        return index.body_blob

    def is_own(self, entry: MailEntry) -> bool:
        """Whether the world's user sent this message (they may see its Bcc)."""
        user = self.ctx.user_email
        return bool(user and user.lower() in bare_addresses(entry.sender))

    # --- writing ---------------------------------------------------------------------

    def sent_mbox(self, view: MailView) -> Path:
        """Where sent mail goes: option ``sent_mbox``, else the mbox holding most of the
        user's mail (first in sorted order on ties), else ``mail/Sent.mbox``."""
        configured = self.ctx.option("sent_mbox")
        if configured:
            from mcp_servers._core import PathResolver

            # Checked as text here; opened beneath the app-data root's descriptor on append.
            parts = PathResolver(self.root).at(str(configured), argument="sent_mbox", allow_root=False).parts
            return self.root.joinpath(*parts)
        if not view.indexes:
            return self.root / DEFAULT_SENT_MBOX
        if len(view.indexes) == 1 or not self.ctx.user_email:
            return view.indexes[0].path
        user = self.ctx.user_email
        counts = [sum(1 for e in index.entries if involves(e, user)) for index in view.indexes]
        best = max(range(len(counts)), key=lambda i: (counts[i], -i))
        return view.indexes[best].path

    def append(self, message: Message, sender: str) -> MailEntry:
        """Append ``message`` to the sent mbox; returns its entry (the cache is updated, not dropped)."""
        view = self.view()
        target = self.sent_mbox(view)
        data = render_message(message)
        with file_lock(target):
            before = self.data.stamp(target)
            cached = self._cache.peek(target)
            try:
                span = append_message(self.data.open_append(target), sender, data)
            except OutsideRoot:
                raise ToolError(
                    ErrorCode.path_outside_root,
                    f"the sent mailbox {self.display_name(target)} leads out of the app data",
                ) from None
            index = cached[1] if cached is not None and cached[0] == before else None
            number = (index.entries[-1].order + 1) if index and index.entries else 1
            entry, _ = make_entry(data, target, span, number, self.display_name(target))
            assert entry is not None  # we just rendered its headers
            if index is not None:
                self._cache.put(target, index.with_appended(entry))
            else:  # new file, or changed by someone else meanwhile: index it on next read
                self._cache.invalidate(target)
        return entry
