"""Service tokens kept in files: written once by a deployment, read by every ``atoll`` command.

``docker compose`` has no way to generate a secret, and a token written in the compose file
is the same for everyone who has that file. So compose's one-shot ``tokens`` service runs
``python -m atoll.service_tokens FILE…``, which writes a random token into each file named
``ATOLL_…_TOKEN`` (each on a volume that only the services using that token mount); every
service then starts with ``ATOLL_TOKEN_DIR`` pointing at its mounted volumes, and
:func:`load_token_dir` sets each token variable from its file before the command reads its
settings. A variable already set keeps its value (an operator's own token wins), and a token
file, once written, is kept across restarts.
"""

from __future__ import annotations

import re
import secrets
import sys
from pathlib import Path

from pydantic import Field

from atoll.settings import AtollSettings, export, variable

#: The token variables (and so the token files): ATOLL_API_TOKEN, ATOLL_ENV_TOKEN, …
TOKEN_NAME = re.compile(r"ATOLL_[A-Z0-9_]*TOKEN")
#: Longest token file read (a token is a line, not a document).
_MAX_TOKEN_BYTES = 4096


class TokenDirSettings(AtollSettings):
    """``ATOLL_TOKEN_DIR``: where a deployment mounted its token files (read by every command
    at start, :func:`load_token_dir`)."""

    token_dir: str = Field("", description="folder of ATOLL_…_TOKEN files (empty: none)")


def load_token_dir(folder: str | Path) -> list[str]:
    """Set every unset (or empty) ``ATOLL_…_TOKEN`` variable from the file of the same name
    in ``folder`` or in one of its subfolders; returns the names set. Files of other names,
    links and empty files are ignored; a missing folder sets nothing."""
    root = Path(folder)
    candidates = [*root.glob("*"), *root.glob("*/*")] if root.is_dir() else []
    loaded = []
    for path in sorted(candidates):
        name = path.name
        if not TOKEN_NAME.fullmatch(name) or variable(name) or path.is_symlink() or not path.is_file():
            continue
        with path.open("rb") as file:
            token = file.read(_MAX_TOKEN_BYTES).decode("utf-8", errors="replace").strip()
        if token:
            export(name, token)
            loaded.append(name)
    return loaded


def write_token_files(paths: list[str]) -> list[str]:
    """For each path (its file name an ``ATOLL_…_TOKEN`` variable): write that variable's
    value when it is set, else keep a token file already there, else write a new random token
    (256 bits). Returns a line per file saying which; raises ValueError for a bad name."""
    said = []
    for text in paths:
        path = Path(text)
        if not TOKEN_NAME.fullmatch(path.name):
            raise ValueError(f"{text}: a token file is named after its variable (ATOLL_…_TOKEN)")
        given = (variable(path.name) or "").strip()
        if not given and path.is_file() and path.read_text(encoding="utf-8").strip():
            said.append(f"{path.name}: kept")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((given or secrets.token_urlsafe(32)) + "\n", encoding="utf-8")
        path.chmod(0o644)  # read by the services' own (non-root) user; the volume is theirs alone
        said.append(f"{path.name}: {'from the environment' if given else 'generated'}")
    return said


if __name__ == "__main__":
    try:
        for line in write_token_files(sys.argv[1:]):
            print(line)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
