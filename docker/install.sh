#!/bin/sh
# How every atoll service image installs atoll: the one recipe its Dockerfile's two stages run.
#
#   sh install.sh dependencies EXTRA...
#       Build stage, in a folder holding constraints.txt, pyproject.toml and requirements.py:
#       a virtualenv at /opt/atoll with the dependencies of atoll's core and those extras, every
#       version pinned by constraints.txt (pip itself first: the venv's bundled pip backtracks for
#       minutes without the pins' resolver). Leaves requirements.txt for slim.py. Source changes
#       do not touch this layer.
#   sh install.sh atoll SRC
#       Final stage: atoll itself from SRC into that virtualenv, nothing resolved anew
#       (--no-deps), then SRC removed.
set -eu
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PIP_NO_CACHE_DIR=1
venv=/opt/atoll

case "${1:-}" in
dependencies)
    shift
    [ "$#" -gt 0 ] || { echo "install.sh dependencies: name the extras to install" >&2; exit 2; }
    python -m venv "$venv"
    "$venv/bin/pip" install -c constraints.txt pip setuptools wheel
    python requirements.py "$@" > requirements.txt
    "$venv/bin/pip" install -c constraints.txt -r requirements.txt
    ;;
atoll)
    [ "$#" -eq 2 ] || { echo "install.sh atoll: name the source folder" >&2; exit 2; }
    "$venv/bin/pip" install --no-deps --no-build-isolation "$2"
    rm -rf "$2" "$venv/src"
    ;;
*)
    echo "usage: install.sh dependencies EXTRA... | install.sh atoll SRC" >&2
    exit 2
    ;;
esac
