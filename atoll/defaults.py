"""Where atoll writes when nothing says otherwise: the one definition of each default location,
read by the experiment model, the CLI, the viewer and run deletion (imports nothing, so the CLI
can read it without loading the experiment model)."""

OUTPUT_DIR = "atoll-out"
DEFAULT_STORE = f"sqlite:///{OUTPUT_DIR}/atoll.db"
DEFAULT_ARTIFACTS = f"file://{OUTPUT_DIR}/artifacts"
