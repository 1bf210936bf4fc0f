"""Office Open XML helpers shared by the documents and presentations servers.

Kept outside both server packages so that loading one server never imports the other
(``mcp_servers/<name>/__init__.py`` registers tools and pulls in its libraries). Light to
import: Pillow and the Office libraries load inside the functions that need them.
"""
