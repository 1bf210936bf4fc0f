"""The v1.1 task.toml's collect step (`python /app/tools/collect_world_snapshot.py`, run in the
world service) in atoll's world image: `atoll env collect-snapshot`, the world's final snapshot
into /logs/world/final_snapshot.tar.gz."""

import os
import sys

os.execvp("atoll", ["atoll", "env", "collect-snapshot", *sys.argv[1:]])
