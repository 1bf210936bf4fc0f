"""Trim an image's virtualenv after its dependencies are installed, in the build stage (the final
stage copies the result): what no atoll service loads is removed, nothing it does.

    /opt/atoll/bin/python slim.py

- pymupdf 2.x requires its layout analyzer (pymupdf.layout, inside the pymupdf wheel, plus the
  pymupdf-layout and pymupdf4llm distributions, onnxruntime and networkx). atoll only opens,
  reads, renders and writes PDFs; the analyzer serves `page.get_layout()` and the layout modes of
  `find_tables()`, which atoll never calls, and `import pymupdf` loads its ONNX model when it is
  there (about 55 MB more memory and twice the import time in every process that reads a PDF).
  They go, with every distribution only they needed.
- Test suites shipped inside packages (`tests` packages: pandas, numpy, scipy, matplotlib, …).
- litellm's proxy admin UI (static web pages; the SDK never serves them).
- The asyncio variant of the Kubernetes client (`kubernetes.aio`, a full second copy of the
  generated API; atoll uses the synchronous client, which never imports it).
- The C headers pymupdf ships for building against MuPDF.

Bytecode (`__pycache__`) stays: the service user cannot write it, and without it every process
compiles what it imports anew (litellm + pymupdf + fastmcp: twice the CPU time at each start).
Prints what it removed and how many MB.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name

# Requirements that are cut: (distribution, requirement) pairs whose target atoll never uses.
CUT = {("pymupdf", name) for name in ("onnxruntime", "networkx", "pymupdf-layout", "pymupdf4llm")}
# Kept whatever needs them: what the final stage's `pip install --no-deps --no-build-isolation` uses.
BUILD_TOOLS = {"pip", "setuptools", "wheel"}
# Directories under site-packages, removed where present.
TREES = [
    "pymupdf/layout",
    "pymupdf/mupdf-devel",
    "litellm/proxy/_experimental/out",
    "kubernetes/aio",
]


def needed(roots: list[str], installed: dict[str, metadata.Distribution], cut: set | None = None) -> set[str]:
    """Every installed distribution reachable from roots, not following the `cut` requirements
    (CUT unless given), and following the extras asked for (`name[extra]`)."""
    cut = CUT if cut is None else cut
    keep, seen, pending = set(), set(), []
    for line in roots:
        requirement = Requirement(line)
        if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
            continue
        pending.append((canonicalize_name(requirement.name), frozenset(requirement.extras)))
    while pending:
        name, extras = pending.pop()
        dist = installed.get(name)
        if dist is None or (name, extras) in seen:
            continue
        seen.add((name, extras))
        keep.add(name)
        for line in dist.requires or []:
            requirement = Requirement(line)
            environments = [{"extra": extra} for extra in extras] or [{"extra": ""}]
            if requirement.marker and not any(requirement.marker.evaluate(env) for env in environments):
                continue
            target = canonicalize_name(requirement.name)
            if (name, target) not in cut:
                pending.append((target, frozenset(requirement.extras)))
    return keep


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def main(argv: list[str]) -> int:
    requirements_file = Path(argv[0] if argv else "requirements.txt")
    roots = [
        line.strip()
        for line in requirements_file.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    site = Path(sysconfig.get_paths()["purelib"])
    before = _size(site)
    installed = {
        canonicalize_name(dist.metadata["Name"]): dist for dist in metadata.distributions(path=[str(site)])
    }
    keep = needed(roots, installed) | BUILD_TOOLS
    unused = sorted(set(installed) - keep)
    if unused:
        print(f"slim: uninstalling what nothing atoll uses needs: {' '.join(unused)}")
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", *unused], check=True)
    for tree in TREES:
        if (site / tree).is_dir():
            shutil.rmtree(site / tree)
            print(f"slim: removed {tree}")
    suites = [
        path for path in site.glob("*/**/tests") if path.is_dir() and (path.parent / "__init__.py").exists()
    ]
    for suite in suites:
        shutil.rmtree(suite, ignore_errors=True)
    print(f"slim: removed {len(suites)} test suites shipped inside packages")
    print(f"slim: site-packages {before // 2**20} MB -> {_size(site) // 2**20} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
