""".ci/run: the README quickstart's test command (setup, then the unit suite), then the container
test, each step labelled; any failed step fails CI and is named as such. The three steps are replaced by scripts that record that they ran and
exit with a chosen status, in a copy of the repository layout; the logic under test is .ci/run's.
The container test's own refusal to pass without an engine is checked with a `docker` that never
answers."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STEPS = {
    "setup": "scripts/setup.sh",
    "unit": ".venv/bin/pytest",
    "containers": "tests/deploy/container_test.sh",
}


def _ci(tmp_path: Path, **statuses: int) -> tuple[subprocess.CompletedProcess, list[str]]:
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    ran = tmp_path / "ran"
    for name, path in STEPS.items():
        script = tmp_path / path
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(
            f"#!/bin/sh\necho \"$0 $*\" >> {ran}\necho '{name} output'\nexit {statuses.get(name, 0)}\n"
        )
        script.chmod(0o755)
    result = subprocess.run([str(tmp_path / ".ci" / "run")], capture_output=True, text=True, timeout=60)
    return result, ran.read_text().splitlines() if ran.exists() else []


def test_all_steps_run_in_order_and_ci_passes(tmp_path):
    result, ran = _ci(tmp_path)
    assert result.returncode == 0, result.stderr
    assert [line.split()[0].removeprefix(str(tmp_path) + "/") for line in ran] == [
        "scripts/setup.sh",
        ".venv/bin/pytest",
        "tests/deploy/container_test.sh",
    ]
    assert ran[0].endswith("--dev") and ran[1].endswith("-q")
    assert (
        "ci: === quickstart tests: bash -c scripts/setup.sh --dev && .venv/bin/pytest -q ===" in result.stdout
    )
    for label in ("quickstart tests", "container test"):
        assert f"ci: === {label} PASSED" in result.stdout
    assert result.stdout.rstrip().endswith("ci: PASSED")


def test_a_container_failure_fails_ci_and_is_named(tmp_path):
    result, ran = _ci(tmp_path, containers=1)
    assert result.returncode != 0
    assert "ci: container test: FAILED (exit status 1" in result.stdout
    assert "ci: quickstart tests: PASSED" in result.stdout
    assert "ci: FAILED: the container test (the quickstart's test command passed)" in result.stderr


def test_a_unit_failure_fails_ci_and_the_container_test_still_runs(tmp_path):
    result, ran = _ci(tmp_path, unit=3)
    assert result.returncode != 0
    assert len(ran) == 3, "the container test must still run after a unit failure"
    assert "ci: quickstart tests: FAILED (exit status 3" in result.stdout
    assert "ci: container test: PASSED" in result.stdout
    assert "ci: FAILED: the quickstart's test command (setup or unit suite" in result.stderr


def test_both_failing_are_both_named(tmp_path):
    result, _ = _ci(tmp_path, unit=1, containers=2)
    assert result.returncode != 0
    assert "ci: FAILED: the quickstart's test command and the container test" in result.stderr


def test_a_setup_failure_skips_the_unit_suite_and_fails_ci(tmp_path):
    result, ran = _ci(tmp_path, setup=1)
    assert result.returncode != 0
    assert [line.split()[0].removeprefix(str(tmp_path) + "/") for line in ran] == [
        "scripts/setup.sh",
        "tests/deploy/container_test.sh",
    ], "no unit suite without setup (&&), the container test still runs"
    assert "ci: quickstart tests: FAILED (exit status 1" in result.stdout
    assert "ci: FAILED: the quickstart's test command" in result.stderr


def test_the_readme_test_command_is_what_ci_runs():
    readme, ci = (ROOT / "README.md").read_text(), (ROOT / ".ci" / "run").read_text()
    assert "scripts/setup.sh --dev && .venv/bin/pytest -q" in readme
    command = "scripts/setup.sh --dev && .venv/bin/pytest -q"
    assert f"quickstart_test_command='{command}'" in ci
    assert 'step "quickstart tests" bash -c "$quickstart_test_command"' in ci
    assert 'step "container test" tests/deploy/container_test.sh' in ci


def _fake_bin(tmp_path: Path, *tools: str) -> Path:
    """A PATH holding a `docker` whose engine never answers, the given tools from the host, and
    what bash needs; nothing else."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    (bin_dir / "docker").chmod(0o755)
    for tool in (
        "docker-compose",
        "curl",
        "python3",
        "timeout",
        "dirname",
        "date",
        "mktemp",
        "rm",
        "id",
        "cat",
        "mkdir",
        "tail",
        "seq",
        "sleep",
        *tools,
    ):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    return bin_dir


def test_the_container_test_fails_saying_why_when_no_engine_can_start(tmp_path):
    bin_dir = _fake_bin(tmp_path)
    env = {
        "PATH": str(bin_dir),
        "HOME": str(tmp_path),
        "DOCKER_HOST": f"unix://{tmp_path}/none.sock",
        "ATOLL_CI_DOCKER_RUN": str(tmp_path / "run"),
        "ATOLL_CI_DOCKER_ROOT": str(tmp_path / "root"),
    }
    result = subprocess.run(
        ["/bin/bash", str(ROOT / "tests" / "deploy" / "container_test.sh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode != 0
    assert "container-test: FAILED" in result.stderr
    assert "no Docker engine answers and dockerd is not installed" in result.stderr
    assert "PASSED" not in result.stdout + result.stderr
    assert not os.path.exists(tmp_path / "root")
