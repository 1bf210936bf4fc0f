"""What one ``code_exec`` call may add to its world, checked while it runs and restored after.

Bytes: ``max_write_mb`` per call, and never past ``max_world_mb`` for the world's files as a
whole, so calls cannot add up to a full disk. Entries: never past ``max_world_entries``
files, folders and links (a world populated beyond it may not grow): empty files and
folders take no blocks, but every one takes an inode of the disk every world shares, and
millions of them would also make every later walk, snapshot and call slow. A watchdog
(:meth:`DiskCap.passed`) kills the call past either cap; a fast writer gets ahead of any
watchdog, so :func:`after_run` then removes what the call created until the world is back
under both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mcp_servers.code import worldtree
from mcp_servers.code.bwrap import SANDBOX_ROOT
from mcp_servers.code.config import SandboxLimits

_MB = 1024 * 1024
_CTIME_SLACK_NS = 2_000_000_000  # file ctimes come from a coarse clock; strip a little early


@dataclass(frozen=True)
class DiskCap:
    """The bytes one call may add and the entries the world may hold after it."""

    allowed_bytes: int
    reason: str
    allowed_entries: int
    entries_reason: str

    @classmethod
    def for_run(cls, limits: SandboxLimits, baseline: worldtree.TreeUsage) -> DiskCap:
        per_call, world = limits.max_write_mb * _MB, limits.max_world_mb * _MB
        entries = max(limits.max_world_entries, baseline.entries)
        entries_reason = (
            f"the world's files passed {limits.max_world_entries} entries (files, folders and links)"
        )
        if world - baseline.allocated_bytes < per_call:
            reason = f"the world's files passed {limits.max_world_mb} MB"
            return cls(max(0, world - baseline.allocated_bytes), reason, entries, entries_reason)
        reason = f"wrote more than {limits.max_write_mb} MB under {SANDBOX_ROOT}"
        return cls(per_call, reason, entries, entries_reason)

    def passed(self, fs_root: Path, baseline: worldtree.TreeUsage, members: list[int]) -> str | None:
        """Why the call must stop now, or None: the tree's growth plus deleted files that
        ``members`` (the call's processes) hold, and the tree's entries."""
        usage = worldtree.measure(fs_root)
        if usage.entries > self.allowed_entries:
            return self.entries_reason
        written = usage.allocated_bytes + worldtree.unlinked_open_bytes(members) - baseline.allocated_bytes
        return self.reason if written > self.allowed_bytes else None


def after_run(
    fs_root: Path, baseline: worldtree.TreeUsage, started_ns: int, cap: DiskCap
) -> tuple[str | None, list[str]]:
    """Strip set-id bits and capabilities; take back what the call added past its caps.
    Returns why the call counts as killed (or None) and notes for its result."""
    notes: list[str] = []
    killed = None
    try:
        finished = worldtree.finish(fs_root, started_ns - _CTIME_SLACK_NS, baseline.inodes)
    except worldtree.TreeTooDeep as exc:
        return f"{exc} under {SANDBOX_ROOT}", notes
    if finished.too_deep_removed:
        killed = f"directories nested deeper than {worldtree.MAX_DEPTH} levels under {SANDBOX_ROOT}"
        notes.append(f"removed {finished.too_deep_removed} folders below level {worldtree.MAX_DEPTH}")
    if finished.stripped:
        notes.append(f"removed set-uid/set-gid bits or file capabilities from {finished.stripped} entries")
    excess = finished.usage.allocated_bytes - baseline.allocated_bytes - cap.allowed_bytes
    trimmed = 0
    if excess > 0:
        trimmed = worldtree.trim(fs_root, finished.new_files, excess)
        killed = killed or cap.reason
        notes.append(f"removed the {trimmed} newest files the run created, to keep it under the cap")
    extra = finished.usage.entries - trimmed - cap.allowed_entries
    if extra > 0:
        removed = worldtree.trim_entries(fs_root, finished.new_entries, extra)
        killed = killed or cap.entries_reason
        notes.append(f"removed {removed} entries the run created, to keep the world under the cap")
    return killed, notes
