"""What a server instance knows about its world: the two roots and its options."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_servers._core.paths import PathResolver


@dataclass(frozen=True)
class ServerContext:
    """Roots and options of one server instance, shared by all its tools.

    ``fs_root`` is the folder the agent sees as ``/``; ``apps_data_root`` holds app data
    (mail, calendar, chat) and is never shown to the agent as paths. ``options`` are free
    per-server knobs; ``user_email`` and ``user_name`` are the world's user (the identity
    used to send mail, post to chat, create events).
    """

    fs_root: Path
    apps_data_root: Path
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def create(
        cls,
        fs_root: str | Path,
        apps_data_root: str | Path,
        options: Mapping[str, Any] | None = None,
    ) -> ServerContext:
        """Build a context; the roots are made absolute (they need not exist yet)."""
        return cls(
            fs_root=Path(fs_root).expanduser().absolute(),
            apps_data_root=Path(apps_data_root).expanduser().absolute(),
            options=dict(options or {}),
        )

    @property
    def files(self) -> PathResolver:
        """The resolver for agent-visible paths (virtual ``/…`` under ``fs_root``)."""
        resolver = self.__dict__.get("_files")
        if resolver is None:
            resolver = PathResolver(self.fs_root)
            object.__setattr__(self, "_files", resolver)
        return resolver

    def app_dir(self, name: str) -> Path:
        """``<apps_data_root>/<name>``, e.g. ``app_dir("mail")``."""
        return self.apps_data_root / name

    def option(self, name: str, default: Any = None) -> Any:
        """One option, or ``default`` when absent or None."""
        value = self.options.get(name)
        return default if value is None else value

    @property
    def user_email(self) -> str | None:
        value = self.option("user_email")
        return str(value).strip() or None if value is not None else None

    @property
    def user_name(self) -> str | None:
        value = self.option("user_name")
        return str(value).strip() or None if value is not None else None
