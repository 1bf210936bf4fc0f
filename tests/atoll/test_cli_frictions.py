"""The CLI's small promises: offline price map, service start lines, runs not found, costs, resumes."""

import os
import subprocess
import sys


def _python(code: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          env=env)


def test_the_cli_never_fetches_litellms_price_map_from_the_internet():
    env = {key: value for key, value in os.environ.items() if key != "LITELLM_LOCAL_MODEL_COST_MAP"}
    result = _python("import atoll.cli, litellm; print(len(litellm.model_cost) > 100)", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"  # the bundled map is loaded
    assert "cost map" not in result.stderr and "raw.githubusercontent" not in result.stderr, result.stderr


def test_a_cost_map_choice_of_the_user_is_kept():
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "False"}
    result = _python("import atoll.cli, os; print(os.environ['LITELLM_LOCAL_MODEL_COST_MAP'])", env=env)
    assert result.stdout.strip() == "False"
