# atoll's environment as the `world` service of an APEX-Agents v1.1 Harbor task (docs/interop.md
# "The world container"). A thin layer over the environment image; build from the repository
# root after the environment image:
#   docker build -f environment/Dockerfile -t atoll-environment:0.1.0 .
#   docker build -f docker/harbor/world.Dockerfile -t atoll-harbor-world:0.1.0 .
# The task's compose file mounts the world at /world (read-only), the overlay at /task_files and
# a volume at /logs/world; docker/harbor/world.compose.yaml is the override.
ARG ENVIRONMENT_IMAGE=atoll-environment:0.1.0
FROM ${ENVIRONMENT_IMAGE}
USER 0
# The collect step the v1.1 task.toml already names (`python /app/tools/collect_world_snapshot.py`
# in the world service) runs atoll's, so the task needs no change there.
COPY docker/harbor/collect_world_snapshot.py /app/tools/collect_world_snapshot.py
RUN mkdir -p /world /task_files /logs/world \
    && chown atoll:atoll /logs/world
USER 10001
ENV PORT=8000 \
    WORLD_DATA_DIR=/world \
    TASK_FILES_DIR=/task_files \
    WORLD_LOGS_DIR=/logs/world \
    ATOLL_ALLOWED_HOSTS=world
EXPOSE 8000
# Ready once the world is seeded (the marker) and /mcp answers, like the task's own probe.
HEALTHCHECK --interval=10s --timeout=15s --start-period=300s --retries=60 \
    CMD ["python", "-c", "import os, sys, urllib.request; os.path.exists('/logs/world/.initial_snapshot_done') or sys.exit(1); urllib.request.urlopen(urllib.request.Request('http://127.0.0.1:8000/mcp', data=b'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2024-11-05\",\"capabilities\":{},\"clientInfo\":{\"name\":\"healthcheck\",\"version\":\"0\"}}}', headers={'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream'}), timeout=10).read(1)"]
CMD ["atoll", "env", "world"]
