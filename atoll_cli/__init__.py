"""The ``atoll`` command line (:mod:`atoll_cli.cli`): the one part that imports every service,
each lazily inside the command that needs it (docs/architecture.md)."""
