"""Container images and the compose file, checked without a container engine: hadolint,
image hygiene (multi-stage, pinned base, non-root, healthcheck), `docker-compose config`,
and each image's entrypoint command answering /health as a plain process."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
IMAGES = {  # Dockerfile → the port its service listens on
    "environment/Dockerfile": 8080,
    "agents_runner/Dockerfile": 8081,
    "grader/Dockerfile": 8082,
    "orchestrator/Dockerfile": 8000,
}


def _instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in lines]


def _final_stage(instructions):
    start = max(i for i, (op, _) in enumerate(instructions) if op == "FROM")
    return instructions[start:]


def _env(instructions) -> dict[str, str]:
    env = {}
    for op, argument in instructions:
        if op == "ENV":
            for key, value in re.findall(r"(\w+)=(\S+)", argument):
                env[key] = value
    return env


@pytest.mark.parametrize("dockerfile", sorted(IMAGES))
def test_dockerfile_lints_clean_and_builds_a_small_non_root_image(dockerfile):
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    result = subprocess.run([hadolint, str(ROOT / dockerfile)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    instructions = _instructions(ROOT / dockerfile)
    bases = [argument.split()[0] for op, argument in instructions if op == "FROM"]
    assert len(bases) >= 2, "multi-stage: dependencies are installed in a build stage"
    stages = {
        argument.split()[-1] for op, argument in instructions if op == "FROM" and " AS " in argument.upper()
    }
    assert all(re.fullmatch(r"python:3\.11\.\d+-slim-bookworm", base) or base in stages for base in bases), (
        bases
    )
    final = _final_stage(instructions)
    assert any(op == "COPY" and "--from=build" in argument for op, argument in final)
    run = " ".join(argument for op, argument in final if op == "RUN")
    assert not re.search(r"\b(gcc|build-essential|make|git)\b", run), "no build tools at runtime"
    assert ("USER", "10001") in final
    healthcheck = next(argument for op, argument in final if op == "HEALTHCHECK")
    port = IMAGES[dockerfile]
    assert f"http://127.0.0.1:{port}/health" in healthcheck
    assert ("EXPOSE", str(port)) in final


def _packages() -> set[str]:
    """The top-level packages ``pip install .`` installs (pyproject's setuptools find)."""
    import tomllib

    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    return {pattern.rstrip("*").split(".")[0] for pattern in include["include"]}


def _ignore_rule(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as the builder reads it: ``*`` within a name, ``**`` across
    folders, ``?`` one character."""
    regex, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            regex, i = regex + "(.*/)?", i + 3
        elif pattern.startswith("**", i):
            regex, i = regex + ".*", i + 2
        elif pattern[i] in "*?":
            regex, i = regex + ("[^/]*" if pattern[i] == "*" else "[^/]"), i + 1
        else:
            regex, i = regex + re.escape(pattern[i]), i + 1
    return re.compile(regex + r"\Z")


def _in_build_context(path: str) -> bool:
    """Whether the builder sends ``path`` (relative to the repository root): the last pattern
    that matches it or a folder above it decides, ``!`` letting it in."""
    rules = [
        (line.startswith("!"), _ignore_rule(line.lstrip("!")))
        for line in (line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines())
        if line and not line.startswith("#")
    ]
    parts = path.split("/")
    steps = ["/".join(parts[:count]) for count in range(1, len(parts) + 1)]
    sent = True
    for lets_in, rule in rules:
        if any(rule.match(step) for step in steps):
            sent = lets_in
    return sent


def test_the_build_context_holds_what_the_images_copy_and_nothing_else():
    """.dockerignore lets in only what the images install; every file a Dockerfile built from
    the repository root copies is in it, and a package pip installs is there whole (a new one
    left out installs nothing and fails only at its first import)."""
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    sent = {path for path in tracked if _in_build_context(path)}
    assert {"atoll", "atoll_cli", "atoll_sample", "orchestrator"} <= _packages()
    for package in _packages():
        files = [path for path in tracked if path.startswith(f"{package}/") and "Dockerfile" not in path]
        assert files and set(files) <= sent, package
    for outside in ("tests/", "docs/", "benchmarks/", "k8s/", "scripts/", ".ci/", "examples/"):
        assert not any(path.startswith(outside) for path in sent), outside
    for name in (".git/config", ".venv/bin/python", "atoll-out/run/x", "atoll.egg-info/PKG-INFO"):
        assert not _in_build_context(name), name
    assert not _in_build_context("atoll/__pycache__/errors.cpython-311.pyc")
    dockerfiles = [*IMAGES, "docker/harbor/world.Dockerfile", "docker/harbor/verifier.Dockerfile"]
    for dockerfile in dockerfiles:
        for op, argument in _instructions(ROOT / dockerfile):
            if op == "COPY" and not argument.startswith("--from"):
                for source in argument.split()[:-1]:
                    source = source.rstrip("/")
                    assert source == "." or any(
                        path == source or path.startswith(f"{source}/") for path in sent
                    ), f"{dockerfile} copies {source}, which .dockerignore leaves out"


@pytest.mark.parametrize("dockerfile", sorted(IMAGES))
def test_every_image_installs_atoll_from_the_whole_context_with_the_one_recipe(dockerfile):
    final = _final_stage(_instructions(ROOT / dockerfile))
    assert ("COPY", ". /src/") in final
    assert ("RUN", "sh /src/docker/install.sh atoll /src") in final
    build = _instructions(ROOT / dockerfile)
    assert any(op == "RUN" and argument.startswith("sh install.sh dependencies ") for op, argument in build)


def test_environment_image_has_the_world_tools_and_roots():
    final = _final_stage(_instructions(ROOT / "environment/Dockerfile"))
    run = " ".join(argument for op, argument in final if op == "RUN")
    for package in (
        "libreoffice-calc-nogui",
        "libreoffice-writer-nogui",
        "libreoffice-impress-nogui",
        "tesseract-ocr",
        "bubblewrap",
        "fonts-dejavu-core",
    ):
        assert package in run
    env = _env(final)
    assert env["ATOLL_FS_ROOT"] == "/filesystem" and env["ATOLL_APPS_DATA_ROOT"] == "/.apps_data"
    # The unprivileged user code_exec drops to when the server runs as root (mcp_servers/code).
    assert re.search(
        r"useradd --system --no-create-home --uid \d+ --user-group --shell /usr/sbin/nologin "
        r"atoll-sandbox",
        run,
    )


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_file_validates_offline_and_wires_services_by_name():
    compose_binary = shutil.which("docker-compose")
    assert compose_binary, "Debian's docker-compose validates compose files without an engine"
    result = subprocess.run(
        [compose_binary, "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    compose = _compose()
    assert "name" not in compose  # docker-compose 1.29 rejects a top-level name
    services = compose["services"]
    assert {"environment", "agents-runner", "grader", "orchestrator", "worker", "postgres", "s3"} <= set(
        services
    )
    worker = services["worker"]["environment"]
    ports = {"environment": 8080, "agents-runner": 8081, "grader": 8082}
    for variable, service in (
        ("ATOLL_ENVIRONMENT_URLS", "environment"),
        ("ATOLL_AGENTS_RUNNER_URL", "agents-runner"),
        ("ATOLL_GRADER_URL", "grader"),
    ):
        assert worker[variable] == f"http://{service}:{ports[service]}"
    # Services built from the Dockerfiles this test suite lints.
    built = {service["build"]["dockerfile"] for service in services.values() if "build" in service}
    assert built == set(IMAGES)
    # No token is written in the file: the one-shot tokens service generates each into a volume
    # of its own, which only its users mount (the environment and the worker share the env's).
    text = (ROOT / "docker-compose.yml").read_text()
    assert "compose-env-token" not in text and "compose-agent-token" not in text
    token_volumes = {
        name: {volume.split(":")[0] for volume in service.get("volumes", ()) if volume.startswith("token-")}
        for name, service in services.items()
    }
    assert token_volumes["environment"] == {"token-env", "token-mcp"}
    assert token_volumes["orchestrator"] == {"token-api"}
    assert token_volumes["agents-runner"] == {"token-agent"} and token_volumes["grader"] == {"token-grader"}
    assert token_volumes["worker"] == {"token-env", "token-mcp", "token-agent", "token-grader"}
    for name in ("environment", "agents-runner", "grader", "orchestrator", "worker"):
        variables = services[name]["environment"]
        assert variables["ATOLL_TOKEN_DIR"] == "/run/atoll-tokens", name
        assert not [key for key in variables if key.endswith("_TOKEN")], name
    tokens = services["tokens"]
    assert tokens["command"][:3] == ["python", "-m", "atoll.service_tokens"] and tokens["restart"] == "no"
    assert all(tokens["environment"][key] == f"${{{key}:-}}" for key in tokens["environment"])
    assert [name for name, service in services.items() if service.get("ports")] == ["orchestrator"]
    assert "seccomp=unconfined" in services["environment"]["security_opt"]


def test_compose_sample_experiment_is_valid_and_uses_the_baked_benchmark():
    from atoll.experiment_file import parse_experiment

    spec = parse_experiment((ROOT / "docker" / "sample-experiment.yaml").read_text())
    assert spec.benchmark == "/opt/atoll/sample-benchmark" and spec.concurrency.trials == 1
    assert "/opt/atoll/sample-benchmark" in (ROOT / "orchestrator/Dockerfile").read_text()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _entrypoint(dockerfile: str, port: int, tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """The image's CMD and ENV, moved to a free loopback port and temporary paths."""
    final = _final_stage(_instructions(ROOT / dockerfile))
    command = json.loads(next(argument for op, argument in final if op == "CMD"))
    for flag, value in (("--host", "127.0.0.1"), ("--port", str(port))):
        if flag in command:
            command[command.index(flag) + 1] = value
    env = {key: value for key, value in _env(final).items() if key != "PATH"}
    env = {
        key: (str(port) if key.endswith("_PORT") else "127.0.0.1" if key.endswith("_HOST") else value)
        for key, value in env.items()
    }
    for key, value in list(env.items()):
        if value.startswith("/") and key.startswith("ATOLL_"):  # roots and caches → a temporary folder
            env[key] = str(tmp_path / value.strip("/").replace("/", "_"))
    env["ATOLL_STORE"] = f"sqlite:///{tmp_path / 'store.db'}"
    bin_dir = str(Path(sys.executable).parent)
    return [str(Path(bin_dir) / command[0]), *command[1:]], {
        **os.environ,
        **env,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
    }


@pytest.mark.slow
def test_each_image_entrypoint_starts_and_answers_health(tmp_path):
    processes = []
    try:
        for dockerfile in sorted(IMAGES):
            port = _free_port()
            command, env = _entrypoint(dockerfile, port, tmp_path / Path(dockerfile).parent.name)
            (tmp_path / Path(dockerfile).parent.name).mkdir()
            log = open(tmp_path / f"{Path(dockerfile).parent.name}.log", "wb")  # noqa: SIM115
            processes.append(
                (
                    dockerfile,
                    port,
                    log,
                    subprocess.Popen(command, env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT),
                )
            )
        deadline = time.monotonic() + 90
        for dockerfile, port, log, process in processes:
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert process.poll() is None, (
                    f"{dockerfile}: entrypoint exited: {Path(log.name).read_text()[-2000:]}"
                )
                assert time.monotonic() < deadline, f"{dockerfile}: no /health answer"
                time.sleep(0.3)
    finally:
        for _dockerfile, _port, log, process in processes:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
            log.close()
