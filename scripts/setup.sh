#!/usr/bin/env bash
# Set up atoll on a fresh Debian/Ubuntu machine: system packages, a virtualenv in .venv,
# and (with --dev) the test services. Safe to run again; it skips what is already there.
#
#   scripts/setup.sh          runtime: LibreOffice, tesseract, bubblewrap + .venv with atoll
#   scripts/setup.sh --dev    also test tools (pytest, ruff, SeaweedFS, validators, Docker), PostgreSQL,
#                             the MCP TypeScript SDK (npm ci in tests/mcp_clients/ts) and
#                             .venv-harbor (Python >= 3.12 with Harbor's ATIF models)
set -euo pipefail
cd "$(dirname "$0")/.."

dev=0
[ "${1:-}" = "--dev" ] && dev=1

system_packages=(libreoffice-calc-nogui libreoffice-writer-nogui libreoffice-impress-nogui
  python3-uno tesseract-ocr tesseract-ocr-eng bubblewrap fonts-dejavu-core fonts-noto-core)
# The container test (tests/deploy/container_test.sh): an engine, compose 1.29, and debootstrap
# to make the base image where Docker Hub cannot be reached.
[ $dev = 1 ] && system_packages+=(docker.io docker-compose debootstrap chromium)

missing=()
for package in "${system_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing system packages: ${missing[*]}"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: missing system packages: ${missing[*]}" >&2
    echo "setup: install them with: sudo apt-get install --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
fi

# code_exec never runs its sandbox as host root: a root server gives each run a host uid of its
# own (ATOLL_CODE_SANDBOX_UIDS); this user is the fixed, shared alternative, used only when
# ATOLL_CODE_SANDBOX_USER names it (see docs/security.md).
if [ "$(id -u)" = 0 ] && ! getent passwd atoll-sandbox >/dev/null; then
  echo "setup: creating the unprivileged code_exec sandbox user atoll-sandbox"
  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin atoll-sandbox
fi

python=${PYTHON:-python3}
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
  echo "setup: atoll needs Python >= 3.11 ($python is $("$python" --version 2>&1))" >&2; exit 1; }
[ -x .venv/bin/python ] || "$python" -m venv .venv
# Old pips (23.x, what venv bundles on Python 3.11) give up resolving this dependency set.
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade "pip>=25"
# `all`: every service's extra (the images install one each, see docs/deploy.md).
extras="all"
[ $dev = 1 ] && extras="all,dev"
# Pinned by constraints.txt (scripts/lock.sh writes it): without the pins, pip's resolver can
# backtrack over the boto3/botocore/aiobotocore releases for an hour and then give up
# (resolution-too-deep); with them the install takes about a minute.
.venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[${extras}]"

if [ $dev = 1 ]; then
  # The store tests need a PostgreSQL server on 127.0.0.1:5432 (user postgres, trust auth).
  if command -v pg_isready >/dev/null && ! pg_isready -q -h 127.0.0.1 -p 5432; then
    if command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
      echo "setup: starting PostgreSQL"
      pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
    fi
  fi
  pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null || echo "setup: warning: no PostgreSQL on 127.0.0.1:5432; the PostgreSQL tests will fail" >&2
  # Harbor's own ATIF models check atoll's exports (tests/orchestrator/viewer/test_harbor_interop.py,
  # docs/interop.md). Harbor needs Python >= 3.12 and atoll's tests run on 3.11, so it gets a
  # virtualenv of its own beside .venv: .venv-harbor.
  harbor_spec="harbor>=0.25,<0.26"
  if ! .venv-harbor/bin/python -c 'import harbor.utils.trajectory_validator' 2>/dev/null; then
    python312=""
    for candidate in python3.12 python3.13 "$(command -v pyenv >/dev/null && pyenv root)"/versions/3.1[23]*/bin/python \
      "$HOME"/.pyenv/versions/3.1[23]*/bin/python; do
      if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
        python312="$candidate"; break
      fi
    done
    if [ -n "$python312" ]; then
      rm -rf .venv-harbor
      "$python312" -m venv .venv-harbor
      .venv-harbor/bin/python -m pip install -q --disable-pip-version-check "$harbor_spec"
    else
      echo "setup: warning: no Python >= 3.12 found (python3.12, python3.13, pyenv): install one" \
        "(apt-get install python3.12 python3.12-venv, or pyenv install 3.12) and run scripts/setup.sh --dev" \
        "again; until then the ATIF validation test fails" >&2
    fi
  fi
  # The MCP TypeScript SDK client test (tests/mcp_clients) runs under Node >= 20, its packages
  # pinned by the committed lockfile.
  if command -v node >/dev/null && command -v npm >/dev/null \
    && node -e 'process.exit(Number(process.versions.node.split(".")[0]) < 20 ? 1 : 0)'; then
    npm ci --prefix tests/mcp_clients/ts --no-audit --no-fund --loglevel=error
  else
    echo "setup: warning: Node >= 20 with npm is needed for the TypeScript MCP client test" >&2
  fi
fi
echo "setup: ready (.venv/bin/atoll)"
