"""Agent implementations; each module registers one agent (see agents_runner.registry)."""
