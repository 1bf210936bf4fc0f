"""The v1.1 Harbor image targets (docker/harbor/), checked without a container engine: they lint
clean, the commands they run are atoll's, and the world's compose override merges over a v1.1
task's compose file keeping its mounts, variables and healthcheck."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from typer.testing import CliRunner

from atoll_cli.cli import app

ROOT = Path(__file__).resolve().parents[2]
HARBOR = ROOT / "docker" / "harbor"

# What Mercor's conversion writes as a task's environment/docker-compose.yaml (abridged).
V11_TASK_COMPOSE = """\
services:
  world:
    image: "archipelago-harbor-world:v1"
    expose:
      - "8000"
    volumes:
      - "../../../worlds/world_x:/world:ro"
      - "./task_files:/task_files:ro"
      - "world_logs:/logs/world"
    environment:
      PORT: "8000"
      WORLD_CAPTURE_INITIAL_SNAPSHOT: "1"
    healthcheck:
      test: ["CMD", "python3", "-c", "import os,sys; sys.exit(0)"]
      interval: 10s
      retries: 300
      start_period: 600s
  main:
    image: "agent:latest"  # Harbor's own compose layer gives main its image
    depends_on:
      world:
        condition: service_healthy
    volumes:
      - "world_logs:/logs/world:ro"
volumes:
  world_logs:
"""


def test_the_harbor_dockerfiles_lint_clean_and_stay_non_root():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    for name in ("verifier.Dockerfile", "world.Dockerfile"):
        result = subprocess.run([hadolint, str(HARBOR / name)], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr
        text = (HARBOR / name).read_text()
        assert re.findall(r"^USER (\S+)", text, re.MULTILINE)[-1] == "10001"


def test_the_images_run_atoll_commands():
    world = (HARBOR / "world.Dockerfile").read_text()
    assert 'CMD ["atoll", "env", "world"]' in world
    assert "/app/tools/collect_world_snapshot.py" in world  # the path the v1.1 task.toml names
    assert '"env", "collect-snapshot"' in (HARBOR / "collect_world_snapshot.py").read_text()
    assert "exec atoll grade verifier /tests" in (HARBOR / "test.sh").read_text()
    assert "COPY docker/harbor/test.sh /tests/test.sh" in (HARBOR / "verifier.Dockerfile").read_text()
    for command in (["env", "world"], ["env", "collect-snapshot"], ["grade", "verifier"]):
        result = CliRunner().invoke(app, [*command, "--help"])
        assert result.exit_code == 0, (command, result.output)


def test_the_world_override_merges_over_a_v11_task_compose(tmp_path):
    task = tmp_path / "environment"
    task.mkdir()
    (task / "docker-compose.yaml").write_text(V11_TASK_COMPOSE)
    shutil.copy(HARBOR / "world.compose.yaml", task / "override.yaml")
    result = subprocess.run(
        [shutil.which("docker-compose"), "-f", "docker-compose.yaml", "-f", "override.yaml", "config"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=task,
    )
    assert result.returncode == 0, result.stderr
    world = yaml.safe_load(result.stdout)["services"]["world"]
    assert world["image"] == "atoll-harbor-world:0.1.0"
    assert world["environment"] == {"PORT": "8000", "WORLD_CAPTURE_INITIAL_SNAPSHOT": "1"}
    # compose 1.29 prints short volume strings (SOURCE:TARGET[:ro]), later versions mappings
    targets = {
        (v["target"], v.get("read_only", False))
        if isinstance(v, dict)
        else (v.split(":")[1], v.endswith(":ro"))
        for v in world["volumes"]
    }
    targets = dict(targets)
    assert targets == {"/world": True, "/task_files": True, "/logs/world": False}
    assert "healthcheck" in world and "seccomp=unconfined" in world["security_opt"]
