#!/usr/bin/env bash
# The v1.1 verifier entry point: grade /tests (the task's grading_config.json and markers)
# against /logs/agent/trajectory.json and /logs/world/*_snapshot.tar.gz, write /logs/verifier/.
# The judge comes from GRADING_MODEL (else the task's grading_settings) through
# LITELLM_PROXY_API_BASE / LITELLM_PROXY_API_KEY when set (the task.toml's verifier env).
set -euo pipefail
exec atoll grade verifier /tests "$@"
