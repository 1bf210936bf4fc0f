"""Where trial artifacts go: a local directory or any fsspec URL (s3://bucket/prefix …).

Layout: ``<root>/<experiment>/<trial_id>/attempt-<n>/{trajectory.json,grade.json,
before.tar.gz,after.tar.gz}``. Writes go to a temporary name first, then are moved into
place, so a crash never leaves a half-written artifact under its final name.
"""

from __future__ import annotations

import os
from pathlib import Path

import fsspec

from atoll.errors import AtollError


class ArtifactStore:
    def __init__(self, url: str, *, storage_options: dict | None = None) -> None:
        if "://" not in url:
            url = "file://" + os.path.abspath(url)
        elif url.startswith("file://") and not url.startswith("file:///"):
            url = "file://" + os.path.abspath(url.removeprefix("file://"))
        self.url = url.rstrip("/")
        try:
            self.fs, self.root = fsspec.core.url_to_fs(self.url, **(storage_options or {}))
        except (ImportError, ValueError) as exc:
            raise AtollError("bad_artifact_store", f"artifact store {url}: {exc}") from None

    def _full(self, key: str) -> str:
        return f"{self.root}/{key}"

    def uri(self, key: str) -> str:
        protocol = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        return f"{protocol}://{self._full(key)}"

    def exists(self, key: str) -> bool:
        return self.fs.exists(self._full(key))

    def put_bytes(self, key: str, data: bytes) -> str:
        path = self._full(key)
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        partial = path + ".partial"
        with self.fs.open(partial, "wb") as handle:
            handle.write(data)
        self.fs.mv(partial, path)
        return self.uri(key)

    def put_file(self, key: str, local_path: str | Path) -> str:
        path = self._full(key)
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        self.fs.put_file(str(local_path), path + ".partial")
        self.fs.mv(path + ".partial", path)
        return self.uri(key)

    def get_bytes(self, key_or_uri: str) -> bytes:
        """The bytes of an artifact given by key (relative to this store) or full URI."""
        uri = key_or_uri if "://" in key_or_uri else self.uri(key_or_uri)
        with fsspec.open(uri, "rb") as handle:
            return handle.read()

    def get_file(self, uri: str, local_path: str | Path) -> Path:
        with fsspec.open(uri, "rb") as source, open(local_path, "wb") as target:
            while block := source.read(1 << 20):
                target.write(block)
        return Path(local_path)


def trial_prefix(experiment: str, trial_id: str, attempt: int) -> str:
    return f"{experiment}/{trial_id}/attempt-{attempt}"
