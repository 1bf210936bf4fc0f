# atoll's grader as the verifier of an APEX-Agents v1.1 Harbor task (docs/interop.md "The
# APEX-Agents v1.1 verifier contract"). A thin layer over the grader image; build from the
# repository root after the grader image:
#   docker build -f grader/Dockerfile -t atoll-grader:0.1.0 .
#   docker build -f docker/harbor/verifier.Dockerfile -t atoll-harbor-verifier:0.1.0 .
# A v1.1 task's tests/Dockerfile (`FROM archipelago-harbor-verifier:v1`, `COPY . /tests/`) then
# names this image instead; Harbor runs /tests/test.sh, which this image owns.
ARG GRADER_IMAGE=atoll-grader:0.1.0
FROM ${GRADER_IMAGE}
USER 0
COPY docker/harbor/test.sh /tests/test.sh
# /logs/verifier is written by the verifier alone: the agent's and the world's logs are other
# folders (the grader refuses an output folder that overlaps them).
RUN chmod 0755 /tests/test.sh \
    && mkdir -p /logs/verifier /logs/agent /logs/world \
    && chown atoll:atoll /logs/verifier
USER 10001
# No service: the container runs the grading once and exits (0 with reward files, 1 with
# grading_error.json).
HEALTHCHECK NONE
CMD ["bash", "/tests/test.sh"]
