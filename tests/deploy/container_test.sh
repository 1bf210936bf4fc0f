#!/usr/bin/env bash
# The container test: build the four images from this checkout, bring the compose stack up,
# run the sample experiment through it (every task), fetch its report, run code_exec sandboxed
# inside the environment container, run the APEX-Agents v1.1 world and verifier images
# (docker/harbor/) on a one-file world, and take the stack down again (`down -v`).
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
  if [ -n "${world_container:-}" ]; then
    docker rm -f "$world_container" >/dev/null 2>&1 || true
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
# One trial per sample task (18 since the persona task); the image's own sample decides.
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

# --- 9. APEX-Agents v1.1: atoll as a Harbor task's world and verifier (docs/interop.md) --------
say "the v1.1 world and verifier images (docker/harbor/)"
docker build -q -f docker/harbor/world.Dockerfile -t atoll-harbor-world:0.1.0 . >/dev/null \
  || fail "building docker/harbor/world.Dockerfile failed"
docker build -q -f docker/harbor/verifier.Dockerfile -t atoll-harbor-verifier:0.1.0 . >/dev/null \
  || fail "building docker/harbor/verifier.Dockerfile failed"
v11="$scratch/v11"
mkdir -p "$v11/world" "$v11/task_files/filesystem" "$v11/logs" "$v11/verifier"
# A v1.1 world of one file: filesystem.tar.gz and an mcp_config.json naming Archipelago's
# filesystem server; the task's overlay adds a second file.
python3 - "$v11/world" <<'EOF' || fail "writing the one-file v1.1 world failed"
import io, json, sys, tarfile
from pathlib import Path
world = Path(sys.argv[1])
data = b"quarterly revenue: 42\n"
with tarfile.open(world / "filesystem.tar.gz", "w:gz") as archive:
    member = tarfile.TarInfo("notes.txt")
    member.size = len(data)
    archive.addfile(member, io.BytesIO(data))
servers = {"filesystem_server": {"transport": "stdio", "command": "uv"}}
(world / "mcp_config.json").write_text(json.dumps({"mcpServers": servers}))
EOF
echo "overlay" >"$v11/task_files/filesystem/brief.txt"
# The task's tests/grading_config.json (v1.1's shape: one output_llm verifier), mounted over the
# verifier image's /tests beside its test.sh.
cat >"$v11/grading_config.json" <<'EOF'
{"metadata": {"task_id": "task_ci", "task_name": "ci", "world_id": "world_ci", "domain": "Banking",
  "expected_output": "message_in_console"},
 "grading_settings": {"llm_judge_model": "openai/judge", "llm_judge_extra_args": null},
 "verifiers": [{"verifier_id": "v1", "verifier_version": 1, "world_id": "world_ci", "task_id": "task_ci",
   "eval_config_id": "ec_output_llm", "verifier_values": {"criteria": "States the revenue", "is_primary_objective": true},
   "verifier_index": 0, "verifier_dependencies": null}],
 "eval_configs": [{"eval_config_id": "ec_output_llm", "eval_defn_id": "output_llm"}],
 "scoring_config": {"scoring_config_id": "sc_default", "scoring_defn_id": "template"}}
EOF
chmod -R a+rX "$v11" && chmod 0777 "$v11/logs" "$v11/verifier"
world_container=$(docker run -d --network none --security-opt seccomp=unconfined --tmpfs /tmp \
  -e WORLD_CAPTURE_INITIAL_SNAPSHOT=1 -v "$v11/world:/world:ro" -v "$v11/task_files:/task_files:ro" \
  -v "$v11/logs:/logs/world" atoll-harbor-world:0.1.0) || fail "the world image did not start"
for _ in $(seq 90); do
  [ "$(docker inspect -f '{{.State.Health.Status}}' "$world_container" 2>/dev/null)" = healthy ] && break
  [ "$(docker inspect -f '{{.State.Running}}' "$world_container" 2>/dev/null)" = true ] \
    || { docker logs --tail 40 "$world_container" >&2; fail "the world container exited while booting (log above)"; }
  sleep 2
done
[ "$(docker inspect -f '{{.State.Health.Status}}' "$world_container")" = healthy ] \
  || { docker logs --tail 40 "$world_container" >&2; fail "the world container never became healthy (seeded, /mcp answering)"; }
timeout 120 docker exec "$world_container" python /app/tools/collect_world_snapshot.py >/dev/null \
  || { docker logs --tail 40 "$world_container" >&2; fail "the v1.1 collect step failed in the world container"; }
docker rm -f "$world_container" >/dev/null && world_container=""
for snapshot in initial final; do
  members=$(tar -tzf "$v11/logs/${snapshot}_snapshot.tar.gz") || fail "no readable ${snapshot}_snapshot.tar.gz in the world's logs"
  echo "$members" | grep -q 'filesystem/notes.txt' && echo "$members" | grep -q 'filesystem/brief.txt' \
    || fail "the ${snapshot} snapshot lacks the world's file or the task's overlay: $(echo $members)"
done
say "world image: seeded, healthy, initial and final snapshots collected"
# The verifier with no agent trajectory: an infra error (grading_error.json, exit 1), never a zero.
set +e
docker run --rm --network none -v "$v11/logs:/logs/world:ro" -v "$v11/verifier:/logs/verifier" \
  -v "$v11/grading_config.json:/tests/grading_config.json:ro" \
  atoll-harbor-verifier:0.1.0 >"$scratch/verifier.log" 2>&1
verifier_status=$?
set -e
[ "$verifier_status" = 1 ] && [ -s "$v11/verifier/grading_error.json" ] && [ ! -e "$v11/verifier/reward.txt" ] \
  || { tail -20 "$scratch/verifier.log" >&2; fail "the verifier image did not report a missing trajectory as a grading error (exit $verifier_status)"; }
python3 -c 'import json, sys; e = json.load(open(sys.argv[1])); assert e["grading_error"] is True and "trajectory" in e["detail"], e' \
  "$v11/verifier/grading_error.json" || fail "grading_error.json is not the v1.1 shape"
say "verifier image: a missing trajectory is grading_error.json, exit 1"
