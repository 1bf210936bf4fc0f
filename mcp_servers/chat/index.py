"""Reading a Google Chat Takeout export into per-group indexes, cached per file version.

Layout (with or without the ``Google Chat/`` prefix)::

    <apps_data>/chat/[Google Chat/]Groups/<group_id>/{messages.json, group_info.json}
    <apps_data>/chat/[Google Chat/]Users/User <user_id>/user_info.json

Each ``messages.json`` is parsed once per version (``FileCache``: mtime/size/inode) into
a :class:`~atoll.formats.chat.messages.GroupMessages`: messages with real UTC timestamps, root posts newest first and
replies per topic in time order. Beneath that, a content is parsed once per process
(``_PARSED``, by the sha256 of the file's bytes and its name): every trial's world is a new
copy of its seed, whose spaces would otherwise be parsed again for every trial. A
``GroupMessages`` is never changed once built (a post makes a new one) and its messages are
made from records that are never changed, so every world may hold the same one. A group whose file is broken is reported (once) and
skipped; every other group keeps being served.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from atoll.content_cache import ContentCache
from atoll.formats.chat.messages import GroupMessages, decode_json, index_messages
from atoll.runtime import cyclic_gc_paused
from mcp_servers._core.app_data import AppData
from mcp_servers._core.problems import ProblemLog
from mcp_servers._core.store import FileCache

logger = logging.getLogger("mcp_servers.chat")

PREFIXES = ("Google Chat", "")  # an export with the prefix wins over one without

#: Parsed messages.json files by (content sha256, name in the chat folder), shared by every
#: world of the process; bounded in files and in messages.
_PARSED: ContentCache[GroupMessages] = ContentCache(
    max_entries=1024, max_weight=500_000, weigh=lambda parsed: len(parsed.messages)
)


def load_messages(data: AppData, path: Path, label: str) -> GroupMessages:
    """Parse one messages.json (read beneath the app-data root's descriptor); never raises
    for a broken file (it gives ``error``); FileNotFoundError when it is gone."""
    try:
        content = data.read_bytes(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        return GroupMessages(error=f"{label} is not valid JSON ({exc})")
    return _PARSED.get(content, label, lambda: _parse_messages(content, label))


def _parse_messages(content: bytes, label: str) -> GroupMessages:
    with cyclic_gc_paused():
        try:
            raw = decode_json(content)
        except ValueError as exc:
            return GroupMessages(error=f"{label} is not valid JSON ({exc})")
        return index_messages(raw, label=label)


def load_json_object(data: AppData, path: Path) -> dict[str, Any] | str:
    """A small JSON object file (group_info, user_info), or the reason it is unreadable."""
    try:
        raw = json.loads(data.read_bytes(path))
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        return f"not valid JSON ({exc})"
    return raw if isinstance(raw, dict) else "not a JSON object"


@dataclass(frozen=True)
class GroupFolder:
    group_id: str  # folder name: "Space AAAA…", "DM 8hB2…"
    folder: Path
    label: str  # relative path for messages, e.g. "Google Chat/Groups/Space X/messages.json"

    @property
    def messages_path(self) -> Path:
        return self.folder / "messages.json"

    @property
    def info_path(self) -> Path:
        return self.folder / "group_info.json"

    @property
    def code(self) -> str:
        return self.group_id.split(" ", 1)[1] if " " in self.group_id else self.group_id


class ChatIndex:
    """Finds groups and users of the export and caches their parsed files."""

    def __init__(self, root: Path, apps_data_root: Path) -> None:
        self.root = root
        self.data = AppData(apps_data_root, root.name)  # root is <apps_data_root>/chat
        self.messages: FileCache[GroupMessages] = FileCache(
            self._load_messages, max_entries=4096, stamp=self.data.stamp
        )
        self.objects: FileCache[dict[str, Any] | str] = FileCache(
            lambda path: load_json_object(self.data, path), max_entries=8192, stamp=self.data.stamp
        )
        self._problems = ProblemLog(logger)

    def _load_messages(self, path: Path) -> GroupMessages:
        return load_messages(self.data, path, path.relative_to(self.root).as_posix())

    def _children(self, kind: str) -> list[tuple[str, Path, str]]:
        found: dict[str, tuple[str, Path, str]] = {}
        for prefix in PREFIXES:
            base = self.root / prefix / kind if prefix else self.root / kind
            # Listed and checked through the app-data root's descriptor (never by path).
            for entry in sorted(self.data.entries(base), key=lambda e: e.name):
                name = entry.name
                folder = base / name
                if name.startswith(".") or name in found:
                    continue
                if entry.is_symlink():
                    if not self.data.contains(folder):  # a link out of the app data
                        self.report(f"chat folder {kind}/{name} links outside the app data; skipped")
                        continue
                    if not self.data.is_dir(folder):
                        continue
                elif not entry.is_dir():
                    continue
                label = f"{prefix}/{kind}/{name}" if prefix else f"{kind}/{name}"
                found[name] = (name, folder, label)
        return [found[name] for name in sorted(found)]

    def groups(self) -> list[GroupFolder]:
        """Every group folder, sorted by id."""
        return [
            GroupFolder(name, folder, f"{label}/messages.json")
            for name, folder, label in self._children("Groups")
        ]

    def user_folders(self) -> list[tuple[str, Path]]:
        """``(user_id, folder)`` of every ``Users/User <id>`` folder."""
        out = []
        for name, folder, _ in self._children("Users"):
            out.append((name[5:] if name.startswith("User ") else name, folder))
        return out

    def group_messages(self, group: GroupFolder) -> GroupMessages:
        """The parsed messages of ``group`` (empty when it has no messages.json)."""
        if not self.data.contains(group.messages_path):
            return GroupMessages(error=f"{group.label} links outside the app data; channel skipped")
        try:
            parsed = self.messages.get(group.messages_path)
        except FileNotFoundError:
            return GroupMessages()
        for problem in ([parsed.error] if parsed.error else []) + parsed.problems:
            self.report(problem)
        return parsed

    def json_object(self, path: Path) -> dict[str, Any]:
        """A small JSON object (group/user info); ``{}`` when absent or broken (reported)."""
        if not self.data.contains(path):
            return {}
        try:
            value = self.objects.get(path)
        except FileNotFoundError:
            return {}
        if isinstance(value, str):
            self.report(f"{path.relative_to(self.root).as_posix()} is {value}; ignored")
            return {}
        return value

    def contains(self, path: Path) -> bool:
        """Whether ``path`` resolves inside the app data (by descriptor; see AppData.contains)."""
        return self.data.contains(path)

    def report(self, problem: str) -> None:
        """Log a data problem once per server."""
        self._problems.report(problem)
