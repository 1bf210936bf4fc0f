"""Fixtures: one generated sample benchmark per test session, and its worlds unzipped."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest

from tests.shared_sample import generated_sample

CONSULTING = "world_keystone_consulting"
DEAL = "world_atlas_mna"


def pytest_generate_tests(metafunc):
    if "task_id" in metafunc.fixturenames:
        records = json.loads((generated_sample() / "tasks_and_rubrics.json").read_text(encoding="utf-8"))
        metafunc.parametrize("task_id", [record["task_id"] for record in records])


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    return generated_sample()


@pytest.fixture(scope="session")
def worlds(sample_dir, tmp_path_factory) -> dict[str, Path]:
    """world_id -> the unzipped world (with ``filesystem/`` and ``.apps_data/``)."""
    roots = {}
    for archive in sorted((sample_dir / "world_files_zipped").glob("*.zip")):
        root = tmp_path_factory.mktemp(archive.stem)
        with zipfile.ZipFile(archive) as bundle:
            bundle.extractall(root)
        roots[archive.stem] = root
    return roots


@pytest.fixture(scope="session")
def tasks(sample_dir) -> dict[str, dict]:
    """task_id -> the raw JSON record from tasks_and_rubrics.json."""
    records = json.loads((sample_dir / "tasks_and_rubrics.json").read_text(encoding="utf-8"))
    return {record["task_id"]: record for record in records}


def fs(world_root: Path, virtual_path: str) -> Path:
    return world_root / "filesystem" / virtual_path.lstrip("/")


def numbers_in(text: str) -> list[float]:
    """Numbers as a grader reads them: thousands separators dropped."""
    return [float(m.replace(",", "")) for m in re.findall(r"\d[\d,]*(?:\.\d+)?", text)]


def answer_number_met(check: dict, answer: str) -> bool:
    value = check["value"]
    slack = max(check.get("tolerance", 0.0), abs(value) * check.get("rel_tolerance", 0.0))
    return any(abs(number - value) <= slack + 1e-9 for number in numbers_in(answer))


def checks(task: dict, kind: str) -> list[dict]:
    return [c["check"] for c in task["rubric"] if c.get("check") and c["check"]["kind"] == kind]
