"""A trial pod's checkpoint folder reached through presigned URLs only (no store credentials).

The worker presigns a GET and a PUT of each fixed checkpoint file (:data:`CHECKPOINT_FILES`:
``latest.json`` and both slots' ``world.delta.tar.gz`` and ``agent.json``) with the attempt's
other URLs (:func:`orchestrator.executors.kubernetes_trial.presign_attempt`);
:class:`PresignedCheckpointStore` gives :func:`~orchestrator.executors.checkpoints.read_latest`
and :class:`~orchestrator.executors.checkpoints.CheckpointWriter` the few store calls they
make (``exists``, ``get_bytes``, ``get_file``, ``put_bytes``, ``put_file``, ``uri``) over plain
HTTP. Every failure is an OSError, as a store's: the reader then starts over saying why, the
writer skips the checkpoint.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from orchestrator.executors.checkpoints import AGENT_NAME, LATEST_NAME, SLOTS, WORLD_NAME

#: The checkpoint files of a trial, relative to its checkpoint folder.
CHECKPOINT_FILES = (LATEST_NAME, *(f"{slot}/{name}" for slot in SLOTS for name in (WORLD_NAME, AGENT_NAME)))


class PresignedCheckpointStore:
    """The trial's checkpoint folder ``folder`` (a key; ``folder_uri`` its URI) through the
    presigned ``urls``: file name (:data:`CHECKPOINT_FILES`) -> {"GET": url, "PUT": url}."""

    def __init__(self, folder: str, folder_uri: str, urls: dict[str, dict[str, str]]) -> None:
        self.folder, self.folder_uri, self.urls = folder, folder_uri, urls
        self.timeout = httpx.Timeout(600.0, connect=10.0)

    def _name(self, key_or_uri: str) -> str:
        for prefix in (f"{self.folder}/", f"{self.folder_uri}/"):
            if key_or_uri.startswith(prefix):
                return key_or_uri[len(prefix) :]
        raise OSError(f"{key_or_uri} is not in the checkpoint folder {self.folder_uri}")

    def _url(self, key_or_uri: str, method: str) -> str:
        url = self.urls.get(self._name(key_or_uri), {}).get(method)
        if url is None:
            raise OSError(f"the trial input has no presigned {method} URL for {self.uri(key_or_uri)}")
        return url

    def uri(self, key_or_uri: str) -> str:
        return f"{self.folder_uri}/{self._name(key_or_uri)}"

    def _get(self, key_or_uri: str) -> httpx.Response:
        try:
            return httpx.get(self._url(key_or_uri, "GET"), timeout=self.timeout)
        except httpx.HTTPError as exc:
            raise OSError(f"{self.uri(key_or_uri)}: {type(exc).__name__}: {exc}") from exc

    def exists(self, key: str) -> bool:
        response = self._get(key)
        if response.status_code == 404:
            return False
        if response.status_code != 200:
            raise OSError(f"{self.uri(key)}: HTTP {response.status_code}: {response.text[:200]}")
        return True

    def get_bytes(self, key_or_uri: str) -> bytes:
        response = self._get(key_or_uri)
        if response.status_code != 200:
            raise OSError(f"{self.uri(key_or_uri)}: HTTP {response.status_code}: {response.text[:200]}")
        return response.content

    def get_file(self, uri: str, local_path: str | Path) -> Path:
        try:
            with httpx.stream("GET", self._url(uri, "GET"), timeout=self.timeout) as response:
                if response.status_code != 200:
                    raise OSError(f"{self.uri(uri)}: HTTP {response.status_code}")
                with open(local_path, "wb") as handle:
                    for block in response.iter_bytes(1 << 20):
                        handle.write(block)
        except httpx.HTTPError as exc:
            raise OSError(f"{self.uri(uri)}: {type(exc).__name__}: {exc}") from exc
        return Path(local_path)

    def _put(self, key: str, content: bytes | Path) -> str:
        url = self._url(key, "PUT")
        try:
            response = put_presigned(url, content, self.timeout)
        except httpx.HTTPError as exc:
            raise OSError(f"{self.uri(key)}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 300:
            raise OSError(f"{self.uri(key)}: HTTP {response.status_code}: {response.text[:200]}")
        return self.uri(key)

    def put_bytes(self, key: str, data: bytes) -> str:
        return self._put(key, data)

    def put_file(self, key: str, local_path: str | Path) -> str:
        return self._put(key, Path(local_path))


def put_presigned(url: str, content: bytes | Path, timeout: float | httpx.Timeout) -> httpx.Response:
    """PUT ``content`` to a presigned URL, a file streamed with its Content-Length; raises
    httpx.HTTPError, and leaves the status to the caller (each names its refusal its own way)."""
    if isinstance(content, Path):
        with content.open("rb") as handle:
            return httpx.put(url, content=handle, timeout=timeout)
    return httpx.put(url, content=content, timeout=timeout)


__all__ = ["CHECKPOINT_FILES", "PresignedCheckpointStore", "put_presigned"]
