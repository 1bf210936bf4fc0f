"""Which URLs populate may read and snapshots may be written to (``ATOLL_URL_ALLOW``), checked
on what is finally opened.

Always, with or without an allow-list: a local source or destination is an absolute path or an
absolute ``file://`` URL. ``~`` is never expanded (fsspec would expand it to the service's home)
and a relative path or ``file://a/b`` (which fsspec opens relative to the working directory,
not as ``/a/b``) is refused; so is ``file:/x`` without the two slashes (fsspec strips it, a
string check would not). The caller opens :func:`resolve_url`'s answer, the real path that was
checked, not the string it was given.

Unset (the default), any fsspec URL is accepted otherwise: the control plane is the
orchestrator's, behind ``ATOLL_ENV_TOKEN``. Set to comma-separated prefixes (``s3://my-bucket/,
file:///srv/worlds/``), a URL must start with one of them *after* normalisation, so that
``file:///srv/worlds/../../etc`` or a symlink under ``/srv/worlds`` cannot read ``/etc``:

- a local path or ``file://`` URL is compared by its real path (symlinks and ``..`` resolved);
- any other URL may not contain ``.`` or ``..`` path segments (also percent-encoded) or
  fsspec chaining (``::``), whose inner URL the prefix would not see;
- an HTTP(S) redirect is followed only when its target is itself allowed
  (:func:`opener_options` re-checks every hop before it is requested); a folder listed from a
  store is read file by file, each file's URL checked (:func:`check_url`).

End a prefix with ``/``: ``s3://bucket`` would also admit ``s3://bucket-of-someone-else``.
"""

from __future__ import annotations

import functools
import os
from typing import Any
from urllib.parse import unquote, urlsplit

from atoll.errors import AtollError, ErrorCode

_LOCAL_SCHEMES = ("file", "local")


def _split(url: str) -> tuple[str | None, str]:
    """(scheme or None for a plain path, the rest), as fsspec reads ``scheme://rest``."""
    if "://" in url:
        scheme, rest = url.split("://", 1)
        if len(scheme) > 1:  # fsspec's rule too: a one-letter "scheme" is a Windows drive
            return scheme.lower(), rest
    return None, url


def _local_real_path(url: str, purpose: str) -> str | None:
    """The real path a local URL names, or None for a remote one; refuses what fsspec would
    open somewhere else than a plain reading says (``~``, relative paths, ``file:/x``)."""
    scheme, rest = _split(url)
    if scheme is not None and scheme not in _LOCAL_SCHEMES:
        return None
    if not rest.startswith("/"):
        what = "'~' is not expanded" if rest.startswith("~") else "it must be absolute"
        form = "a file:// URL" if scheme else "a local path"
        raise AtollError(
            ErrorCode.bad_local_url,
            f"{purpose} {url!r} is {form} that is not absolute ({what}; write file:///abs/path)",
        )
    return os.path.realpath(rest)


def _normalise(url: str, purpose: str) -> str:
    real = _local_real_path(url, purpose)
    if real is None:
        scheme, rest = _split(url)
        return f"{scheme}://{rest}"
    keep_slash = url.endswith("/") and real != "/"
    return "file://" + real + ("/" if keep_slash else "")


def check_url(url: str, prefixes: list[str], purpose: str) -> None:
    """Raise AtollError(``url_not_allowed``) unless ``url`` lies under one of ``prefixes``;
    AtollError(``bad_local_url``) for a relative or ``~`` local path, list or not.

    ``purpose`` names the field in the message ("populate source").
    """
    resolve_url(url, prefixes, purpose)


def resolve_url(url: str, prefixes: list[str], purpose: str) -> str:
    """The URL to open for ``url``, checked as :func:`check_url` does: a local one as
    ``file://<real path>`` (the path that was checked), any other unchanged."""
    real = _local_real_path(url, purpose)
    if prefixes:
        if "::" in url:
            raise AtollError(
                ErrorCode.url_not_allowed, f"{purpose} {url!r}: chained fsspec URLs are not allowed"
            )
        if real is None:
            # A backslash is a separator to some servers and stores: split on it too.
            segments = unquote(urlsplit(url).path).replace("\\", "/").split("/")
            if "." in segments or ".." in segments:
                raise AtollError(
                    ErrorCode.url_not_allowed, f"{purpose} {url!r}: '.' and '..' segments are not allowed"
                )
        normalised = _normalise(url, purpose)
        if not any(normalised.startswith(_normalise(prefix, "ATOLL_URL_ALLOW entry")) for prefix in prefixes):
            raise AtollError(
                ErrorCode.url_not_allowed,
                f"{purpose} {url!r} is not under an allowed prefix (ATOLL_URL_ALLOW: {', '.join(prefixes)})",
            )
    return url if real is None else "file://" + real


class RedirectNotAllowed(AtollError):
    """An HTTP(S) store answered a redirect to a URL outside ``ATOLL_URL_ALLOW``."""

    def __init__(self, purpose: str, source: str, target: str, prefixes: tuple[str, ...]) -> None:
        super().__init__(
            ErrorCode.url_not_allowed,
            f"{purpose} {source!r} redirects to {target!r}, which is not under an allowed prefix "
            f"(ATOLL_URL_ALLOW: {', '.join(prefixes)}); the redirect was not followed",
        )


def opener_options(url: str, prefixes: list[str], purpose: str, options: dict[str, Any]) -> dict[str, Any]:
    """fsspec storage options for opening ``url``: ``options``, plus, for an HTTP(S) URL while
    an allow-list is set, a hook that checks every redirect's target before it is requested
    and raises :class:`RedirectNotAllowed` (which fsspec may wrap: see :func:`refusal_in`);
    for a local one, folders made as files are written beneath them, as an object store needs
    none (a snapshot to ``file://…/snap_1`` writes ``snap_1/filesystem/…``)."""
    scheme, _ = _split(url)
    if scheme in (None, "file", "local"):
        return {"auto_mkdir": True, **options}
    if not prefixes or scheme not in ("http", "https"):
        return options
    client_kwargs = dict(options.get("client_kwargs") or {})
    client_kwargs["trace_configs"] = [
        *client_kwargs.get("trace_configs", ()),
        _redirect_check(tuple(prefixes), purpose),
    ]
    return {**options, "client_kwargs": client_kwargs}


@functools.lru_cache(maxsize=16)  # one per allow-list, so fsspec's instance cache keeps working
def _redirect_check(prefixes: tuple[str, ...], purpose: str) -> Any:
    import aiohttp  # fsspec's HTTP filesystem is built on it; loaded with the first HTTP URL
    from yarl import URL

    async def on_redirect(_session: Any, _context: Any, params: Any) -> None:
        response = params.response
        location = response.headers.get("Location", "")
        target = str(response.url.join(URL(location)))
        try:
            check_url(target, list(prefixes), purpose)
        except AtollError:
            raise RedirectNotAllowed(purpose, str(params.url), target, prefixes) from None

    trace = aiohttp.TraceConfig()
    trace.on_request_redirect.append(on_redirect)
    return trace


def refusal_in(exc: BaseException) -> AtollError | None:
    """The policy refusal behind ``exc`` (fsspec turns errors raised while it looks a file up
    into FileNotFoundError), so callers report it instead of "not found"."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, RedirectNotAllowed):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
