"""Code server: ``code_exec`` runs a shell command in a bubblewrap sandbox over the world's
files (visible as ``/filesystem``). Consolidated tool: ``code(action=exec)``."""

from mcp_servers.code import tools  # noqa: F401  (registers the tool)
from mcp_servers.code.sandbox import SandboxStatus, sandbox_report, sandbox_status
from mcp_servers.code.server import SERVER

__all__ = ["SERVER", "SandboxStatus", "sandbox_report", "sandbox_status"]
