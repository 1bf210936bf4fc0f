"""The environment service: a world on disk, an MCP gateway over it, populate and snapshot.

Python API: ``create_app(settings)`` builds the FastAPI app; ``EnvironmentServer`` runs one
on a free loopback port in a background thread (embedded mode, tests).
"""

from environment.app import create_app
from environment.server import EnvironmentServer, serve
from environment.settings import EnvironmentSettings

__all__ = ["EnvironmentServer", "EnvironmentSettings", "create_app", "serve"]
