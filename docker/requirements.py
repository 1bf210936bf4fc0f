"""Print the requirements of atoll's given extras (core included), one per line, from the
pyproject.toml of the current directory, so that an image installs its dependencies in a layer of their own before the
source is copied (a source change then reuses the cached dependency layer).

    python docker/requirements.py environment > requirements.txt
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

_SELF = re.compile(r"atoll\[([^\]]+)\]")


def requirements(project: dict, extras: list[str]) -> list[str]:
    optional = project.get("optional-dependencies", {})
    wanted, seen, pending = list(project.get("dependencies", [])), set(), list(extras)
    while pending:
        extra = pending.pop()
        if extra in seen:
            continue
        if extra not in optional:
            raise SystemExit(f"requirements.py: pyproject.toml has no extra {extra!r}")
        seen.add(extra)
        for requirement in optional[extra]:
            self_reference = _SELF.fullmatch(requirement.strip())
            if self_reference:
                pending += [name.strip() for name in self_reference.group(1).split(",")]
            else:
                wanted.append(requirement)
    return list(dict.fromkeys(wanted))


def main(argv: list[str]) -> int:
    pyproject = Path("pyproject.toml")
    if not pyproject.is_file():
        raise SystemExit("requirements.py: no pyproject.toml in the current directory")
    project = tomllib.loads(pyproject.read_text())["project"]
    print("\n".join(requirements(project, argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
