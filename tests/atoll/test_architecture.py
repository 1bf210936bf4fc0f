"""The allowed arrows between atoll's parts (docs/architecture.md), checked on every import."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from tests.source_tree import PACKAGES, ROOT

PARTS = PACKAGES
SERVICES = {"mcp_servers", "environment", "agents_runner", "grader", "orchestrator"}
# part -> the parts it may import (anywhere, lazily included). Nothing imports atoll_cli and only
# atoll_cli imports atoll_sample (tests and benchmarks aside, which are no part).
ALLOWED = {
    "atoll": set(),  # contracts and the shared kit: nothing of ours, not even lazily
    "mcp_servers": {"atoll"},  # servers run standalone
    "environment": {"atoll", "mcp_servers"},
    "agents_runner": {"atoll"},  # never the grader (rubrics) nor the environment (only over MCP)
    "grader": {"atoll"},
    "orchestrator": {"atoll", "mcp_servers", "environment", "agents_runner", "grader"},
    "atoll_sample": {"atoll"},  # the sample benchmark generator writes contracts and files
    "atoll_cli": {"atoll", "atoll_sample", *SERVICES},
}
# part -> the parts it may import only inside a function: `atoll --help` and a bad argument
# load no service (tests/atoll/test_cli_startup.py).
LAZY_ONLY = {"atoll_cli": {"atoll_sample", *SERVICES}}


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(imported part, at module level) for every import of another part in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    top_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [
            (name.split(".")[0], id(node) in top_level) for name in names if name.split(".")[0] in PARTS
        ]
    return found


def test_every_import_follows_an_allowed_arrow():
    wrong = []
    for part in PARTS:
        for path in sorted((ROOT / part).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            for imported, module_level in _imports(path):
                if imported != part and imported not in ALLOWED[part]:
                    wrong.append(f"{relative} imports {imported}")
                elif module_level and imported in LAZY_ONLY.get(part, ()):
                    wrong.append(f"{relative} imports {imported} at module level")
    assert wrong == []


# Inside atoll/: the contracts (the models, error classes and enums the parts exchange; their
# JSON Schemas are generated from them) stand on their own: a contract imports other contracts
# and third-party libraries, never the kit or the shared domain code, which may import contracts.
# docs/architecture.md's floors table lists the same modules (checked below).
CONTRACTS = {
    "atoll.errors",
    "atoll.benchmark",
    "atoll.targets",
    "atoll.coworkers",
    "atoll.apps",
    "atoll.members",
    "atoll.model_arguments",
    "atoll.defaults",
    "atoll.experiment",
    "atoll.agent_config",
    "atoll.judge",
    "atoll.trajectory",
    "atoll.agent_checkpoint",
    "atoll.trial",
    "atoll.grade",
    "atoll.world_manifest",
    "atoll.report_rows",
    "atoll.report_document",
    "atoll.viewer_api",
}


def _atoll_modules_imported(path: Path, root: Path) -> set[str]:
    """The atoll modules ``path`` imports, anywhere in it (``from atoll.x import y`` names
    ``atoll.x.y`` when that is a module of its own)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "atoll"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "atoll":
                continue
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if _module_path(submodule, root) else node.module)
    return found


def _module_path(module: str, root: Path = ROOT) -> Path | None:
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def contract_violations(contracts: set[str], root: Path = ROOT) -> list[str]:
    wrong = []
    for contract in sorted(contracts):
        path = _module_path(contract, root)
        assert path is not None, f"{contract} is no module"
        for imported in sorted(_atoll_modules_imported(path, root)):
            if imported not in contracts:
                wrong.append(f"{contract} imports {imported}, which is no contract")
    return wrong


def test_contracts_import_only_contracts():
    assert contract_violations(CONTRACTS) == []


def test_a_contract_importing_the_kit_is_named(tmp_path):
    (tmp_path / "atoll").mkdir()
    (tmp_path / "atoll" / "errors.py").write_text("")
    (tmp_path / "atoll" / "retry.py").write_text("")
    (tmp_path / "atoll" / "made_up_contract.py").write_text(
        "from atoll import errors\n\n\ndef later():\n    from atoll.retry import backoff\n"
    )
    assert contract_violations({"atoll.made_up_contract", "atoll.errors"}, tmp_path) == [
        "atoll.made_up_contract imports atoll.retry, which is no contract"
    ]


def test_the_floors_table_lists_the_contracts():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    row = next(line for line in doc.splitlines() if line.startswith("| ground: contracts |"))
    listed = {
        "atoll." + name.removeprefix("atoll/").removesuffix(".py").replace("/", ".")
        for name in re.findall(r"`([^`]+\.py)`", row.split("|")[3])
    }
    assert listed == CONTRACTS


def test_the_parts_are_the_packages_pyproject_ships():
    """tests/source_tree.PACKAGES, the one list the source-reading tests share, is what
    pyproject.toml installs: a new package gets its arrows checked."""
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"][
        "include"
    ]
    shipped = {name.removesuffix(".*").removesuffix("*") for name in include}
    assert shipped == set(PARTS)
