"""Each image's extras hold everything its service imports (issue 35, part 4).

Every module of a service is imported in a fresh interpreter where only the distributions its
image installs (``docker/requirements.py`` with the extras its Dockerfile names, and what they
require) can be imported; and every import of the service's modules, at module level and inside
functions (followed into the modules they reach), must name a package its extras declare
(tests/deploy/extras_probe.py). A module left out of an extra is then an error
in this test, not an ImportError in one image at the first call that needs it, as pypdf once was
in the grader's.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).with_name("extras_probe.py")
# Each image's Dockerfile, and the packages of the service it runs, with the `atoll` command
# (atoll_cli) every image starts it by. The sample generator (atoll_sample) runs in none of them:
# the orchestrator image bakes its output at build time, with the document libraries of a
# throwaway stage.
IMAGES = {
    "environment/Dockerfile": ["environment", "mcp_servers", "atoll_cli"],
    "agents_runner/Dockerfile": ["agents_runner", "atoll_cli"],
    "grader/Dockerfile": ["grader", "atoll_cli"],
    "orchestrator/Dockerfile": ["orchestrator", "atoll_cli"],
}


def _extras(dockerfile: str) -> list[str]:
    """The extras the image installs, as its Dockerfile passes them to docker/install.sh (which
    hands them to docker/requirements.py)."""
    found = re.search(r"install\.sh dependencies ([\w ]+?)\n", (ROOT / dockerfile).read_text())
    assert found, f"{dockerfile} does not install its dependencies with docker/install.sh"
    return found.group(1).split()


@pytest.fixture(scope="module")
def probes() -> dict[str, dict]:
    """The probe of every image, run side by side (each is a fresh interpreter importing a whole
    service)."""
    running = {
        dockerfile: subprocess.Popen(
            [sys.executable, str(PROBE), *packages, "--", *_extras(dockerfile)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for dockerfile, packages in IMAGES.items()
    }
    results = {}
    for dockerfile, process in running.items():
        out, err = process.communicate(timeout=240)
        assert process.returncode == 0, f"{dockerfile}: the probe failed\n{err[-3000:]}"
        results[dockerfile] = json.loads(out)
    return results


@pytest.mark.parametrize("dockerfile", sorted(IMAGES))
def test_every_module_of_the_service_imports_with_only_its_images_extras(probes, dockerfile):
    result = probes[dockerfile]
    assert result["failed"] == {}, f"modules that fail to import in the image of {dockerfile}"
    assert result["undeclared"] == {}, (
        f"these modules import packages that the extras of {dockerfile} do not declare "
        "(at module level or inside a function); add them to the service's extra"
    )


def test_the_probe_sees_a_package_an_extra_does_not_hold():
    """The check itself: without the `formats` extra, the grader's readers cannot import."""
    done = subprocess.run(
        [sys.executable, str(PROBE), "grader", "--", "agent"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    missing = {name for names in result["undeclared"].values() for name in names}
    failed = " ".join(result["failed"].values())
    assert {"pypdf", "docx"} <= missing | set(re.findall(r"No module named '(\w+)'", failed))


def test_a_path_that_needs_a_missing_extra_says_which_in_one_line():
    """The orchestrator image holds no document readers (it grades through the grading service):
    grading in-process there names the extra to install instead of failing deep in a reader."""
    script = f"""
import sys
sys.path.insert(0, {str(PROBE.parent)!r})
import extras_probe
declared, held = extras_probe._distributions(["orchestrator", "kubernetes"])
sys.meta_path.insert(0, extras_probe._OnlyTheseExtras(extras_probe._modules(held)))
from atoll.extras import MissingExtra, require_extra
require_extra("agent", "the agent")  # present: nothing raised
try:
    require_extra("formats", "grading in-process", "or set ATOLL_GRADER_URL")
except MissingExtra as error:
    print(error.code, error)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = done.stdout.strip()
    assert "\n" not in line
    assert line.startswith("missing_extra grading in-process needs atoll's 'formats' extra"), line
    assert "python-docx" in line and "pymupdf" in line
    assert "pip install 'atoll[formats]'" in line and "ATOLL_GRADER_URL" in line
