"""Import every module of one service as its image would, with only its extras installed.

Run as ``python extras_probe.py SERVICE_PACKAGE... -- EXTRA...`` in a fresh interpreter: a
finder placed first on ``sys.meta_path`` refuses every top-level module that neither the
standard library, atoll's own packages nor a distribution the extras reach (with what those
require in turn) provides, exactly as a missing package would. Every module of the service
packages is then imported; imports made inside functions (the lazy ones, which importing does not
run) are read from the source of every atoll module that got loaded, and followed through
atoll's own modules, except in a function that calls ``atoll.extras.require_extra`` first. Prints one JSON object:
``{"failed": {module: error}, "lazy": {module: [top-level names]}}``.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import importlib.util
import json
import pkgutil
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
OURS = {
    "atoll",
    "environment",
    "agents_runner",
    "grader",
    "mcp_servers",
    "orchestrator",
    "atoll_cli",
    "atoll_sample",
}
sys.path.insert(0, str(REPO / "docker"))

from requirements import requirements  # noqa: E402  (docker/requirements.py: what an image installs)


def _normal(name: str) -> str:
    return name.lower().replace("_", "-")


def _distributions(extras: list[str]) -> tuple[set[str], set[str]]:
    """Names of the distributions an image with ``extras`` declares (its requirements, core
    included) and of all it holds (those and what they require in turn)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    top = [Requirement(line) for line in requirements(project, extras)]
    pending = [r for r in top if r.marker is None or r.marker.evaluate({"extra": ""})]
    # What a service imports directly must be declared; a declared library's own requirements
    # count as declared with it (pydantic's pydantic-core, fastapi's starlette, a meta-package's
    # contents), anything deeper must be named.
    declared = {_normal(r.name) for r in pending}
    for requirement in list(pending):
        try:
            lines = importlib.metadata.distribution(requirement.name).requires or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for line in lines:
            nested = Requirement(line)
            if nested.marker is None or any(
                nested.marker.evaluate({"extra": extra}) for extra in {"", *requirement.extras}
            ):
                declared.add(_normal(nested.name))
    found: set[str] = set()
    seen: set[tuple[str, str]] = set()  # (distribution, extra): one can be reached with several
    while pending:
        requirement = pending.pop()
        name = _normal(requirement.name)
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # not installed here (a platform marker), so nothing can import it either
        found.add(name)
        for extra_name in {"", *requirement.extras}:
            if (name, extra_name) in seen:
                continue
            seen.add((name, extra_name))
            for line in distribution.requires or []:
                nested = Requirement(line)
                if nested.marker is None or nested.marker.evaluate({"extra": extra_name}):
                    pending.append(nested)
    return declared, found


def _modules(distributions: set[str]) -> set[str]:
    """Top-level modules importable with ``distributions`` installed."""
    allowed = set(sys.stdlib_module_names) | OURS | set(sys.builtin_module_names)
    for module, owners in importlib.metadata.packages_distributions().items():
        if any(_normal(owner) in distributions for owner in owners):
            allowed.add(module)
    return allowed


class _OnlyTheseExtras:
    def __init__(self, allowed: set[str]) -> None:
        self.allowed = allowed
        self.refused: set[str] = set()

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001 (the finder protocol)
        top = name.partition(".")[0]
        if top in self.allowed or top.startswith("_"):
            return None
        self.refused.add(top)
        raise ModuleNotFoundError(f"No module named {top!r} (not in this image's extras)", name=top)


def _imports(module_name: str) -> tuple[list[str], list[str]]:
    """Absolute module names ``module_name`` imports at module level and inside functions,
    leaving out imports in a ``try`` that handles ImportError, those of a function that calls
    ``require_extra`` (optional by design) and those under ``if TYPE_CHECKING:`` (never run);
    ``from a import b`` gives ``a`` and ``a.b``."""
    spec = importlib.util.find_spec(module_name)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return [], []
    found: tuple[list[str], list[str]] = ([], [])

    class Visitor(ast.NodeVisitor):
        functions = 0
        guarded = 0

        def _function(self, node: ast.AST) -> None:
            # A function that checks its extra first (atoll.extras.require_extra) fails with one
            # line naming it where the extra is absent: its imports are optional by design.
            checked = any(
                isinstance(call, ast.Call) and getattr(call.func, "id", None) == "require_extra"
                for call in ast.walk(node)
            )
            self.functions += 1
            self.guarded += checked
            self.generic_visit(node)
            self.guarded -= checked
            self.functions -= 1

        visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

        def visit_Try(self, node: ast.Try) -> None:
            optional = any(_catches_import_error(handler.type) for handler in node.handlers)
            self.guarded += optional
            for statement in node.body:
                self.visit(statement)
            self.guarded -= optional
            for part in (*node.handlers, *node.orelse, *node.finalbody):
                self.visit(part)

        def visit_If(self, node: ast.If) -> None:
            # ``if TYPE_CHECKING:`` imports are the type checker's (typeshed's ``_typeshed``,
            # say): they never run, in any image.
            test = node.test
            if getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING":
                for statement in node.orelse:
                    self.visit(statement)
                return
            self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            if not self.guarded:
                found[bool(self.functions)].extend(alias.name for alias in node.names)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if not self.guarded and node.level == 0 and node.module:
                where = found[bool(self.functions)]
                where.append(node.module)
                where.extend(f"{node.module}.{alias.name}" for alias in node.names)

    Visitor().visit(ast.parse(Path(spec.origin).read_text(), spec.origin))
    return found


def _undeclared(
    loaded: list[str], declared: set[str], own: set[str], service: set[str]
) -> dict[str, list[str]]:
    """For each module of ``own`` packages (the service's and atoll's) that ``loaded`` holds or
    that their functions import, the top-level names it imports (at module level or inside a
    function) that the image's extras do not declare: a package present only because another
    one requires it today is gone when that one stops. Imports inside functions are followed
    from the service's own modules (what its code paths reach), not from atoll's, whose lazy
    tables reach everything. Another service's package loaded here is
    checked in that service's image: a path of this service that runs it in-process calls
    ``require_extra`` first."""
    pending = [name for name in loaded if name.partition(".")[0] in own]
    seen, missing = set(pending), {}
    while pending:
        module = pending.pop()
        absent: set[str] = set()
        at_top, in_functions = _imports(module)
        for name in at_top + in_functions:
            top = name.partition(".")[0]
            if top not in declared:
                absent.add(top)
            elif top in own and module.partition(".")[0] in service and name not in seen and _is_module(name):
                seen.add(name)
                pending.append(name)
        if absent:
            missing[module] = sorted(absent)
    return missing


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _catches_import_error(handler: ast.expr | None) -> bool:
    names = {"ImportError", "ModuleNotFoundError"}
    if isinstance(handler, ast.Name):
        return handler.id in names
    if isinstance(handler, ast.Tuple):
        return any(isinstance(e, ast.Name) and e.id in names for e in handler.elts)
    return False


def main(argv: list[str]) -> int:
    split = argv.index("--")
    packages, extras = argv[:split], argv[split + 1 :]
    declared, held = _distributions(extras)
    allowed = _modules(held)
    finder = _OnlyTheseExtras(allowed)
    for name in list(sys.modules):  # what this script itself loaded must be loaded again
        if name.partition(".")[0] not in allowed and not name.startswith("_"):
            del sys.modules[name]
    sys.meta_path.insert(0, finder)
    failed: dict[str, str] = {}
    for package in packages:
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            try:
                importlib.import_module(info.name)
            except Exception as error:  # every failure is reported, none stops the walk
                failed[info.name] = f"{type(error).__name__}: {error}"
    undeclared = _undeclared(sorted(sys.modules), _modules(declared), {*packages, "atoll"}, set(packages))
    print(json.dumps({"failed": failed, "undeclared": undeclared}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
