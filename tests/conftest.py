"""Suite-wide settings: offline litellm, no stray network; ``serial`` tests run alone."""

import os

# litellm otherwise spends ~10 s trying to download its price map on import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("ATOLL_LOG_LEVEL", "WARNING")

pytest_plugins = ["tests.serial_plugin", "tests.providers.fixtures"]
