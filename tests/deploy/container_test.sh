#!/usr/bin/env bash
# The container test: build the four images from this checkout, bring the compose stack up,
# run the sample experiment through it (every task), fetch its report, run code_exec sandboxed
# inside the environment container, and take the stack down again (`down -v`).
#
#   tests/deploy/container_test.sh        (as root on a Debian machine)
#
# An engine that answers (DOCKER_HOST or the default socket) is used as it is. Otherwise this
# starts Debian's dockerd with a data root of its own, ATOLL_CI_DOCKER_ROOT
# (/var/lib/atoll-ci-docker), kept between runs so images and build cache are reused, and
# stops it by pid at the end. Images that cannot be pulled (Docker Hub unreachable) are made
# locally: the pinned Python base by debootstrap, PostgreSQL and SeaweedFS stand-ins from
# Debian/PyPI packages (docker/standins/). No engine, no pass: it fails saying why.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

state=${ATOLL_CI_DOCKER_ROOT:-/var/lib/atoll-ci-docker}
run_dir=${ATOLL_CI_DOCKER_RUN:-/run/atoll-ci-docker}
project=${ATOLL_CI_PROJECT:-atoll-ci}
started_at=$(date +%s)
dockerd_pid=""
stack_up=0
scratch=$(mktemp -d)

say() { echo "container-test: [$(( $(date +%s) - started_at ))s] $*"; }
fail() { echo "container-test: FAILED after $(( $(date +%s) - started_at ))s: $*" >&2; exit 1; }

compose() { docker-compose -p "$project" -f "$root/docker-compose.yml" "$@"; }

cleanup() {
  local status=$?
  if [ $stack_up = 1 ]; then
    if [ $status != 0 ]; then
      echo "container-test: --- service states and last log lines ---" >&2
      compose ps >&2 || true
      compose logs --no-color --tail=40 >&2 || true
    fi
    say "docker-compose down -v"
    timeout 180 docker-compose -p "$project" -f "$root/docker-compose.yml" down -v --remove-orphans \
      >/dev/null 2>&1 || echo "container-test: warning: docker-compose down failed" >&2
  fi
  if [ -n "$dockerd_pid" ]; then
    say "stopping dockerd (pid $dockerd_pid)"
    kill "$dockerd_pid" 2>/dev/null || true
    for _ in $(seq 60); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$dockerd_pid" 2>/dev/null || true
  fi
  rm -rf "$scratch"
  if [ $status = 0 ]; then say "PASSED"; fi
  echo "container-test: took $(( $(date +%s) - started_at ))s" >&2
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for tool in docker docker-compose curl python3; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/setup.sh --dev installs docker.io and docker-compose)"
done

# --- 1. A Docker engine -------------------------------------------------------------------
if timeout 20 docker info >/dev/null 2>&1; then
  say "using the Docker engine that answers at ${DOCKER_HOST:-the default socket}"
elif DOCKER_HOST="unix://$run_dir/docker.sock" timeout 20 docker info >/dev/null 2>&1; then
  export DOCKER_HOST="unix://$run_dir/docker.sock"  # one this test started earlier and left running
  say "using the Docker engine that answers at $DOCKER_HOST"
else
  command -v dockerd >/dev/null || fail "no Docker engine answers and dockerd is not installed (Debian docker.io; scripts/setup.sh --dev)"
  [ "$(id -u)" = 0 ] || fail "no Docker engine answers, and starting dockerd needs root"
  mkdir -p "$state" "$run_dir"
  if [ -f "$run_dir/dockerd.pid" ] && kill -0 "$(cat "$run_dir/dockerd.pid")" 2>/dev/null; then
    fail "a dockerd (pid $(cat "$run_dir/dockerd.pid")) holds $state but does not answer on $run_dir/docker.sock"
  fi
  rm -f "$run_dir/dockerd.pid"
  say "starting dockerd (data root $state)"
  dockerd --data-root "$state" --exec-root "$run_dir/exec" --pidfile "$run_dir/dockerd.pid" \
    -H "unix://$run_dir/docker.sock" >"$run_dir/dockerd.log" 2>&1 &
  dockerd_pid=$!
  export DOCKER_HOST="unix://$run_dir/docker.sock"
  for _ in $(seq 60); do
    timeout 10 docker info >/dev/null 2>&1 && break
    kill -0 "$dockerd_pid" 2>/dev/null || { tail -20 "$run_dir/dockerd.log" >&2; dockerd_pid=""; fail "dockerd exited at start (log above)"; }
    sleep 1
  done
  timeout 10 docker info >/dev/null 2>&1 || { tail -20 "$run_dir/dockerd.log" >&2; fail "dockerd did not answer within 60s (log above)"; }
fi
# The classic builder: what Debian's docker-compose 1.29 drives, and no buildx needed.
export DOCKER_BUILDKIT=0 COMPOSE_DOCKER_CLI_BUILD=0

have_image() { docker image inspect "$1" >/dev/null 2>&1; }
try_pull() { timeout 60 docker pull -q "$1" >/dev/null 2>&1; }

# --- 2. The pinned base image -------------------------------------------------------------
bases=$(grep -h '^FROM ' environment/Dockerfile agents_runner/Dockerfile grader/Dockerfile orchestrator/Dockerfile \
  | awk '$2 ~ /:/ {print $2}' | sort -u)  # images with a tag, not the names of earlier stages
[ "$(echo "$bases" | wc -l)" = 1 ] || fail "the four Dockerfiles pin different bases: $(echo $bases)"
base=$bases
if have_image "$base"; then
  say "base image $base is present"
elif try_pull "$base"; then
  say "pulled $base"
else
  command -v debootstrap >/dev/null || fail "$base cannot be pulled and debootstrap is not installed to make it"
  say "$base cannot be pulled; making it with debootstrap (Debian bookworm, python3)"
  rootfs="$scratch/rootfs"
  timeout 900 debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$rootfs" "${ATOLL_CI_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$scratch/debootstrap.log" 2>&1 \
    || { tail -20 "$scratch/debootstrap.log" >&2; fail "debootstrap failed (log above)"; }
  # What the slim images leave out: package caches, lists, manuals, translations.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* \
    "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/*
  tar -C "$rootfs" -c . | docker import - local/debian:bookworm >/dev/null
  rm -rf "$rootfs"
  cp -r docker/standins/base "$scratch/base"
  # The host's extra CA certificates: pip and apt in the builds then trust the same roots.
  find /usr/local/share/ca-certificates -name '*.crt' -exec cp {} "$scratch/base/ca/" \; 2>/dev/null || true
  timeout 600 docker build -q -t "$base" "$scratch/base" >/dev/null || fail "building the local base image failed"
  say "made $base locally"
fi

# --- 3. Stand-ins for the third-party images (built beside the four images) ----------------
standin_pids=()
for standin in postgres seaweedfs; do
  image=$(grep -E "^\s+image: .*${standin}" docker-compose.yml | awk '{print $2}' | head -1)
  [ -n "$image" ] || fail "docker-compose.yml names no $standin image"
  if have_image "$image"; then
    say "$image is present"
  elif try_pull "$image"; then
    say "pulled $image"
  else
    say "$image cannot be pulled; building the stand-in from docker/standins/$standin"
    timeout 1200 docker build -q --build-arg "BASE=$base" -t "$image" "docker/standins/$standin" \
      >"$scratch/standin-$standin.log" 2>&1 &
    standin_pids+=("$!:$standin")
  fi
done

# --- 4. The four images -------------------------------------------------------------------
# The four services that have a Dockerfile of their own: worker and s3-bucket reuse the
# orchestrator's image, and naming them too would build it three times side by side.
say "building the four images (docker-compose build)"
build_started=$(date +%s)
timeout 1800 docker-compose -p "$project" -f docker-compose.yml build --parallel \
  environment agents-runner grader orchestrator >"$scratch/build.log" 2>&1 \
  || { tail -60 "$scratch/build.log" >&2; fail "docker-compose build failed (last lines above)"; }
say "images built in $(( $(date +%s) - build_started ))s"
for entry in "${standin_pids[@]}"; do
  wait "${entry%%:*}" || { tail -30 "$scratch/standin-${entry#*:}.log" >&2; fail "building the ${entry#*:} stand-in failed (log above)"; }
done
docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep '^atoll-' | sed 's/^/container-test:   /'

# --- 5. The stack -------------------------------------------------------------------------
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export ATOLL_API_PORT=$port
token=ci-$(python3 -c 'import secrets; print(secrets.token_hex(8))')
export ATOLL_API_TOKEN=$token
say "docker-compose up -d (orchestrator API on 127.0.0.1:$port)"
stack_up=1
timeout 900 docker-compose -p "$project" -f docker-compose.yml up -d >"$scratch/up.log" 2>&1 \
  || { cat "$scratch/up.log" >&2; fail "docker-compose up failed"; }
api=http://127.0.0.1:$port
for _ in $(seq 120); do
  curl -fsS -m 5 "$api/health" >/dev/null 2>&1 && break
  sleep 2
done
curl -fsS -m 5 "$api/health" >/dev/null || fail "the orchestrator API does not answer /health at $api"
say "stack up"

# --- 6. The sample experiment -------------------------------------------------------------
auth=(-H "Authorization: Bearer $token")
created=$(curl -sS -m 120 "${auth[@]}" -X POST --data-binary @docker/sample-experiment.yaml "$api/runs") \
  || fail "POST /runs failed"
echo "container-test:   POST /runs -> $created"
name=$(echo "$created" | python3 -c 'import json, sys; print(json.load(sys.stdin)["name"])') \
  || fail "POST /runs did not answer a run name: $created"
planned=$(echo "$created" | python3 -c 'import json, sys; print(json.load(sys.stdin)["planned"])')
# One trial per sample task (17 since the market-data task); the image's own sample decides.
[ "${planned:-0}" -ge 16 ] || fail "the sample experiment planned $planned trials, not one per sample task"
deadline=$(( $(date +%s) + ${ATOLL_CI_RUN_TIMEOUT:-1200} ))
last=""
while :; do
  counts=$(curl -fsS -m 10 "${auth[@]}" "$api/runs/$name" | python3 -c 'import json, sys; c = json.load(sys.stdin)["counts"]; print(c["done"], c["total"], c["infra_error"])') \
    || counts=""
  if [ -n "$counts" ] && [ "$counts" != "$last" ]; then
    say "trials done/total/infra_error: $counts"
    last=$counts
  fi
  read -r done total infra <<<"${counts:-0 0 0}"
  [ "$infra" = 0 ] || fail "$infra trial(s) ended in infra_error"
  [ "$done" = "$planned" ] && [ "$total" = "$planned" ] && break
  [ "$(date +%s)" -lt "$deadline" ] || fail "the sample experiment did not finish in time (done/total/infra: ${counts:-none})"
  sleep 5
done
curl -fsS -m 300 "${auth[@]}" "$api/runs/$name/report" -o "$scratch/report.json" || fail "GET /runs/$name/report failed"
python3 - "$scratch/report.json" "$planned" <<'EOF' || fail "the report is not what the sample experiment gives"
import json, sys
report = json.load(open(sys.argv[1]))  # Python's json reads the NaN an undefined metric is written as
outcomes = {}
for agent in report["agents"].values():
    for outcome, count in agent["outcomes"].items():
        outcomes[outcome] = outcomes.get(outcome, 0) + count
print(f"container-test:   report outcomes: {outcomes}")
assert sum(outcomes.values()) == int(sys.argv[2]), f"not {sys.argv[2]} trials in the report"
assert not set(outcomes) - {"pass", "fail", "ungradeable"}, "trials that did not finish or failed on infrastructure"
assert outcomes.get("pass", 0) >= 1, "the oracle agent passed no task"
EOF
# A trial retried after a crash can still end done: the worker's log must show none.
crashes=$(compose logs --no-color worker 2>/dev/null | grep -c -E 'crashed|Traceback' || true)
[ "$crashes" = 0 ] || { compose logs --no-color --tail=60 worker >&2; fail "the worker logged $crashes crash line(s) (last lines above)"; }

# --- 7. code_exec inside the environment container ---------------------------------------
say "code_exec inside the environment container"
timeout 180 docker-compose -p "$project" -f docker-compose.yml exec -T environment python - \
  <tests/deploy/code_exec_check.py || fail "code_exec did not run sandboxed in the environment container"

# --- 8. the environment image reads its tools' schemas, computed when it was built ------------
say "the environment image reads its tools' schemas from the cache built into it"
timeout 120 docker-compose -p "$project" -f docker-compose.yml exec -T environment python -c '
import pathlib, tempfile
from mcp_servers import SERVER_NAMES, create_server
from mcp_servers._core import schema_cache
root = pathlib.Path(tempfile.mkdtemp())
for name in SERVER_NAMES:
    create_server(name, fs_root=root / "fs", apps_data_root=root / "apps")
print("container-test:   tool schemas:", schema_cache.counts)
assert schema_cache.counts["computed"] == 0 and schema_cache.counts["read"] > 100, schema_cache.counts
' || fail "the environment image computed its tools' schemas instead of reading them"
