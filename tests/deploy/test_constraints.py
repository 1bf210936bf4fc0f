"""constraints.txt (scripts/lock.sh) pins every requirement the images install inside its range,
so images built with it install exactly the tested set; and docker/requirements.py gives each
image its service's extras only."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _pins() -> dict[str, Version]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep, f"constraints.txt: {line!r} is not NAME==VERSION"
        pins[canonicalize_name(name)] = Version(version)
    return pins


def _image_requirements() -> list[Requirement]:
    """What the images install: the build backend (atoll is built without build isolation),
    the core and every extra but `dev` (test tools never go into an image)."""
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    lines = [*build, *PROJECT["dependencies"]]
    for name, extra in PROJECT["optional-dependencies"].items():
        if name != "dev":
            lines += [line for line in extra if not line.startswith("atoll[")]
    return [Requirement(line) for line in lines]


def test_every_image_requirement_is_pinned_inside_its_range():
    pins = _pins()
    problems = []
    for requirement in _image_requirements():
        if requirement.marker and not requirement.marker.evaluate():
            continue
        pin = pins.get(canonicalize_name(requirement.name))
        if pin is None:
            problems.append(f"{requirement}: no pin")
        elif not requirement.specifier.contains(pin, prereleases=True):
            problems.append(f"{requirement}: pinned {pin}")
    assert not problems, f"run scripts/lock.sh: {problems}"
    assert "pip" in pins and pins["pip"] >= Version("25"), "old pips give up resolving this set"
    assert "atoll" not in pins


def _requirements(*extras: str) -> set[str]:
    output = subprocess.run(
        [sys.executable, str(ROOT / "docker" / "requirements.py"), *extras],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    return {canonicalize_name(Requirement(line).name) for line in output.splitlines()}


def test_each_image_gets_only_its_service_libraries():
    environment, agent = _requirements("environment"), _requirements("agent")
    grader, orchestrator = _requirements("grader"), _requirements("orchestrator", "kubernetes")
    # litellm: the environment makes the virtual coworkers' model calls (environment/coworkers.py).
    assert {"fastmcp", "pymupdf", "pandas", "scipy", "s3fs", "litellm"} <= environment
    assert "litellm" in agent and not {"pandas", "scipy", "pymupdf", "sqlalchemy"} & agent
    assert {"litellm", "pymupdf", "openpyxl"} <= grader and not {"pandas", "scipy", "fastmcp"} & grader
    # The orchestrator image runs the agent of Kubernetes trial pods in-process, not the servers.
    assert {"sqlalchemy", "psycopg", "kubernetes", "litellm", "scipy"} <= orchestrator
    # Workers build world seeds with environment.populate, whose package imports the service.
    assert {"fastmcp", "fsspec", "s3fs", "prometheus-client"} <= orchestrator
    assert not {"pymupdf", "pandas", "python-docx"} & orchestrator


def test_an_unknown_extra_is_refused_by_name():
    result = subprocess.run(
        [sys.executable, str(ROOT / "docker" / "requirements.py"), "nope"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode != 0 and "pyproject.toml has no extra 'nope'" in result.stderr


@pytest.mark.parametrize(
    "dockerfile,extras",
    [
        ("environment/Dockerfile", "environment"),
        ("agents_runner/Dockerfile", "agent"),
        ("grader/Dockerfile", "grader"),
        ("orchestrator/Dockerfile", "orchestrator kubernetes"),
    ],
)
def test_each_dockerfile_installs_its_extras_under_the_constraints(dockerfile, extras):
    assert f"RUN sh install.sh dependencies {extras}\n" in (ROOT / dockerfile).read_text()
    recipe = (ROOT / "docker" / "install.sh").read_text()  # the one recipe every image runs
    assert 'python requirements.py "$@" > requirements.txt' in recipe
    assert "-c constraints.txt -r requirements.txt" in recipe
    assert "--no-deps" in recipe  # the source layer adds atoll itself, nothing resolved anew
