"""Which URLs populate may read and snapshots may be written to (``ATOLL_URL_ALLOW``).

Unset (the default), any fsspec URL is accepted: the control plane is the orchestrator's,
behind ``ATOLL_ENV_TOKEN``. Set to comma-separated prefixes (``s3://my-bucket/,
file:///srv/worlds/``), a URL must start with one of them *after* normalisation, so that
``file:///srv/worlds/../../etc`` or a symlink under ``/srv/worlds`` cannot read ``/etc``:

- a local path or ``file://`` URL is compared by its real path (symlinks and ``..`` resolved);
- any other URL may not contain ``.`` or ``..`` path segments (also percent-encoded) or
  fsspec chaining (``::``), whose inner URL the prefix would not see.

End a prefix with ``/``: ``s3://bucket`` would also admit ``s3://bucket-of-someone-else``.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlsplit

from atoll.errors import AtollError


def _normalise(url: str) -> str:
    if "://" not in url:
        return "file://" + os.path.realpath(url)
    scheme, rest = url.split("://", 1)
    scheme = scheme.lower()
    if scheme in ("file", "local"):
        keep_slash = rest.endswith("/")
        real = os.path.realpath("/" + rest.lstrip("/"))
        return "file://" + real + ("/" if keep_slash and real != "/" else "")
    return f"{scheme}://{rest}"


def check_url(url: str, prefixes: list[str], purpose: str) -> None:
    """Raise AtollError(``url_not_allowed``) unless ``url`` lies under one of ``prefixes``.

    No-op for an empty list. ``purpose`` names the field in the message ("populate source").
    """
    if not prefixes:
        return
    if "::" in url:
        raise AtollError("url_not_allowed", f"{purpose} {url!r}: chained fsspec URLs are not allowed")
    if "://" in url and not url.lower().startswith(("file://", "local://")):
        segments = unquote(urlsplit(url).path).split("/")
        if "." in segments or ".." in segments:
            raise AtollError("url_not_allowed", f"{purpose} {url!r}: '.' and '..' segments are not allowed")
    normalised = _normalise(url)
    if any(normalised.startswith(_normalise(prefix)) for prefix in prefixes):
        return
    raise AtollError(
        "url_not_allowed",
        f"{purpose} {url!r} is not under an allowed prefix (ATOLL_URL_ALLOW: {', '.join(prefixes)})",
    )
