"""Each shared mechanism has one home (docs/architecture.md, "Where each shared mechanism
lives"): the code that does its work appears in that module and nowhere else in the parts."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.source_tree import PACKAGES, ROOT

PARTS = PACKAGES

# mechanism -> (its home, a pattern only its home may contain)
HOMES = {
    # reading the header (sending one, as a server does, is not parsing it)
    "Retry-After parsing": (
        "atoll/retry.py",
        re.compile(r"""(get|_header)\(\s*\w*,?\s*["']retry-after""", re.I),
    ),
    # the user's cache folder (a run's own <output>/.cache is the run's, not this)
    "the cache folder": (
        "atoll/cache_paths.py",
        re.compile(r"""XDG_CACHE_HOME|expanduser\(["']~/\.cache|home\(\)\s*/\s*["']\.cache"""),
    ),
    # OpenTelemetry is imported in one place, and only when an OTLP endpoint is set
    "traces": (
        "atoll/telemetry.py",
        re.compile(r"^\s*(from|import) opentelemetry\b", re.M),
    ),
    # a module-level __getattr__ (PEP 562) written by hand
    "lazy imports": ("atoll/_lazy.py", re.compile(r"^\s*def __getattr__\(name: str\)", re.M)),
    # a zip member's Unix mode: its file type decides whether it is a link
    "zip member types": (
        "atoll/members.py",
        re.compile(r"external_attr\s*>>|0o120000|S_IFMT\(.*external_attr"),
    ),
    # an error code's HTTP status: a table from codes (strings or ErrorCode members, or error
    # classes) to 4xx/5xx statuses, or from statuses to codes; or an error reply given a literal
    # status beside its code (``413, "too_large",``), as an HTTPException, a response's
    # status_code, a starlette.status constant or an ASGI response start. Everywhere else the status is read from the code
    # (atoll.errors.http_status, atoll.http.http_error / error_reply).
    "error codes' HTTP statuses": (
        "atoll/errors.py",
        re.compile(
            r"""(["'](?!(status|https?)["'])[a-z][a-z0-9_]*["']|\bErrorCode\.\w+)\s*:\s*[45]\d\d\b"""
            r"""|\{\s*[A-Z]\w*\s*:\s*[45]\d\d\b|\b[45]\d\d\s*:\s*(["'][a-z][a-z0-9_]*["']|ErrorCode\.\w+)"""
            r"""|\b[45]\d\d\s*,\s*(["'][a-z][a-z0-9_]*["']|ErrorCode\.\w+)\s*,"""
            r"""|HTTPException\(\s*(status_code\s*=\s*)?[45]\d\d\b|status_code\s*=\s*[45]\d\d\b"""
            r"""|\bHTTP_[45]\d\d_[A-Z_]+\b|["']http\.response\.start["']\s*,\s*["']status["']\s*:\s*[45]\d\d\b"""
        ),
    ),
    # an exponential backoff: tenacity's, made in one place (the callers ask atoll.retry.backoff)
    "exponential backoff": ("atoll/retry.py", re.compile(r"\bwait_(random_)?exponential(_jitter)?\b")),
    # a cache of what bytes parse into, by their digest, least recently used out: ContentCache
    "parsed once per content": (
        "atoll/content_cache.py",
        re.compile(
            r"(?s)move_to_end.*\bsha256\(\w+\)\.(hex)?digest\(\)|\bsha256\(\w+\)\.(hex)?digest\(\).*move_to_end"
        ),
    ),
    "tuning the garbage collector": (
        "atoll/runtime.py",
        re.compile(r"\bgc\.(freeze|set_threshold|disable|enable)\("),
    ),
}


def _sources():
    for part in PARTS:
        for path in sorted((ROOT / part).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")


@pytest.mark.parametrize("mechanism", sorted(HOMES))
def test_a_mechanism_lives_in_its_home_only(mechanism):
    home, pattern = HOMES[mechanism]
    found = {relative for relative, text in _sources() if pattern.search(text)}
    assert found == {home}, f"{mechanism} belongs in {home} only"


# A backoff written by hand, anywhere (atoll/retry.py included): a power of the number of tries
# (``first_s * 2 ** (attempt - 1)``) or a pause doubled in a loop (``delay *= 2``,
# ``delay = min(delay * 2, max_s)``). The backoff is tenacity's wait_exponential.
_BACKOFF_FORMULA = re.compile(
    r"\*\*\s*\(?\s*(max\(\s*0\s*,\s*)?(attempt|failures|tries|retries|n)\b"
    r"|\b(backoff|delay|wait|pause|sleep)\w*\s*\*=\s*2\b"
    r"|\b(backoff|delay|wait|pause|sleep)\w*\s*=\s*min\(\s*\w+\s*\*\s*2\b"
)


def test_no_backoff_is_written_by_hand():
    found = {relative for relative, text in _sources() if _BACKOFF_FORMULA.search(text)}
    assert not found, "use atoll.retry.backoff (tenacity's wait_exponential)"


# The settings kit (atoll/settings.py) is the one module that touches the process environment.
_OS_ENVIRONMENT = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def _environment_touches(path: Path) -> list[int]:
    """Lines of ``path`` that touch the process environment: ``os.environ``, ``os.getenv``
    (under any name ``os`` is imported as) or ``from os import environ``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    os_names = {"os"} | {
        alias.asname
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == "os" and alias.asname
    }
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _OS_ENVIRONMENT:
            if isinstance(node.value, ast.Name) and node.value.id in os_names:
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(alias.name in _OS_ENVIRONMENT for alias in node.names)
        ):
            lines.append(node.lineno)
    return lines


def test_only_the_settings_kit_reads_the_environment():
    """A setting is a field of a settings class (atoll.settings.AtollSettings) or read through
    the kit's accessors, so that every variable is typed, documented and found in one place."""
    packages = sorted(
        folder.name
        for folder in ROOT.iterdir()
        if (folder / "__init__.py").is_file() and folder.name != "tests"
    )
    assert set(PARTS) <= set(packages)
    touching = []
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative == "atoll/settings.py":
                continue
            touching += [f"{relative}:{line}" for line in _environment_touches(path)]
    assert touching == [], "read the environment through atoll.settings"


def _documented_homes() -> list[set[str]]:
    """The paths each row of docs/architecture.md's "Where each shared mechanism lives" names
    in its home column."""
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Where each shared mechanism lives") :]
    section = section[: section.index("\n## ")]
    rows = [
        line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| mechanism")
    ]
    return [set(re.findall(r"`([\w/.]+/[\w.]*)`", row.split(" | ")[1])) for row in rows]


def test_the_architecture_doc_names_each_home_and_each_home_exists():
    """A newcomer finds each mechanism in the doc's table, at a path that exists."""
    documented = _documented_homes()
    assert all(documented), "every row names its home as a path"
    named = set().union(*documented)
    assert [path for path in sorted(named) if not (ROOT / path).exists()] == []
    assert {home for home, _ in HOMES.values()} <= named
    assert "atoll/settings.py" in named
