"""Optional extras checked where a path needs one, so that a missing one is one line naming it.

The images install only their service's extra (docs/deploy.md). The orchestrator image, for one,
holds no document readers: it grades through the grading service. A path that would read
documents in-process there calls ``require_extra("formats", "grading in-process")`` first and
fails with ``MissingExtra``: which extra, which of its packages are absent, and how to install it,
instead of an ImportError from deep inside a reader at the first .docx.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import re
from pathlib import Path

from atoll.errors import CodedError, ErrorCode


class MissingExtra(CodedError):
    code = ErrorCode.missing_extra


_PRESENT: set[str] = set()
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([\w-]+)["']""")


def require_extra(extra: str, purpose: str, hint: str = "") -> None:
    """Raise ``MissingExtra`` when a package of atoll's ``extra`` cannot be imported here."""
    if extra in _PRESENT:
        return
    missing = [name for name in _requirements(extra) if not _importable(name)]
    if not missing:
        _PRESENT.add(extra)  # installed packages do not go away while a process runs
    else:
        advice = f"; {hint}" if hint else ""
        raise MissingExtra(
            f"{purpose} needs atoll's {extra!r} extra, which this installation lacks "
            f"(missing: {', '.join(missing)}): pip install 'atoll[{extra}]'{advice}"
        )


@functools.cache
def _requirements(extra: str) -> tuple[str, ...]:
    """Distribution names ``extra`` lists directly or through the extras it includes: from the
    pyproject.toml beside the package in a source checkout (whose installed metadata may lag an
    edit), else from the installed metadata."""
    from packaging.requirements import Requirement

    listed = _extras_of_source() or _extras_of_metadata()
    if extra not in listed:
        raise ValueError(f"atoll has no extra {extra!r}")
    names: list[str] = []
    pending, seen = [extra], set()
    while pending:
        wanted = pending.pop()
        if wanted in seen:
            continue
        seen.add(wanted)
        for line in listed.get(wanted, []):
            requirement = Requirement(line)
            if requirement.name == "atoll":
                pending.extend(requirement.extras)
            else:
                names.append(requirement.name)
    return tuple(dict.fromkeys(names))


def _extras_of_source() -> dict[str, list[str]]:
    import tomllib

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    if not pyproject.is_file():
        return {}
    project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    return project.get("name") == "atoll" and project.get("optional-dependencies") or {}


def _extras_of_metadata() -> dict[str, list[str]]:
    try:
        lines = importlib.metadata.requires("atoll") or []
    except importlib.metadata.PackageNotFoundError:
        return {}
    listed: dict[str, list[str]] = {}
    for line in lines:
        marker = _EXTRA_MARKER.search(line)
        if marker:
            listed.setdefault(marker.group(1), []).append(line.split(";")[0].strip())
    return listed


def _modules_of(distribution: importlib.metadata.Distribution) -> list[str]:
    """The top-level modules ``distribution`` installs, from its own metadata only (its
    top_level.txt, else the first part of each file it records): scanning every installed
    distribution (``packages_distributions``) costs seconds in a full environment."""
    listed = distribution.read_text("top_level.txt")
    if listed:
        return listed.split()
    found: set[str] = set()
    for file in distribution.files or ():
        parts = file.parts
        if (
            len(parts) > 1
            and not parts[0].endswith((".dist-info", ".egg-info", ".data"))
            and parts[0] != ".."
        ):
            found.add(parts[0])
        elif len(parts) == 1 and parts[0].endswith(".py"):
            found.add(parts[0][:-3])
    return sorted(found - {"__pycache__", "bin"})


def _importable(name: str) -> bool:
    try:
        distribution = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    modules = _modules_of(distribution)
    if not modules:  # a meta-package (fastmcp: its code is fastmcp-slim's)
        return True
    for module in modules:
        try:
            if importlib.util.find_spec(module) is not None:
                return True
        except (ImportError, ValueError):
            continue
    return False


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
