"""A real S3-compatible server for tests: SeaweedFS (`weed server -s3`) on loopback ports."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

WEED = shutil.which("weed") or str(Path(os.sys.executable).parent / "weed")


def _free_ports(count: int) -> list[int]:
    sockets = []
    for _ in range(count):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sockets.append(sock)
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


class SeaweedS3:
    """``with SeaweedS3(tmp) as s3: s3.endpoint_url`` — stopped with SIGKILL (it ignores SIGTERM)."""

    def __init__(self, data_dir: Path, *, credentials: tuple[str, str] | None = None) -> None:
        """``credentials`` (access key, secret key): the only identity the server accepts
        (anonymous requests are refused, signatures and presigned URLs are checked);
        without them any request is allowed."""
        self.data_dir = data_dir
        self.credentials = credentials
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> SeaweedS3:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc, metrics) = _free_ports(9)
        command = [
            WEED, "server", f"-dir={self.data_dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-master.port={master}", f"-master.port.grpc={master_grpc}", "-master.volumeSizeLimitMB=64",
            f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}", "-volume.max=8",
            "-filer", f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
            "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}", f"-metricsPort={metrics}",
            # Its Iceberg and Lance servers listen on fixed ports: two servers at once would collide.
            "-s3.port.iceberg=0", "-s3.port.lance=0",
        ]  # fmt: skip
        key, secret = self.credentials or ("any", "any")
        if self.credentials:
            identity = {"name": "admin", "credentials": [{"accessKey": key, "secretKey": secret}]}
            identity["actions"] = ["Admin", "Read", "Write", "List", "Tagging"]
            config = self.data_dir / "s3-identities.json"
            config.write_text(json.dumps({"identities": [identity]}))
            command.append(f"-s3.config={config}")
        log = open(self.data_dir / "weed.log", "wb")  # noqa: SIM115 (lives as long as the process)
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.endpoint_url = f"http://127.0.0.1:{s3}"
        self.storage_options = {
            "key": key,
            "secret": secret,
            "client_kwargs": {"endpoint_url": self.endpoint_url, "region_name": "us-east-1"},
        }
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"weed exited: {(self.data_dir / 'weed.log').read_text()[-2000:]}")
            try:
                if httpx.put(f"{self.endpoint_url}/probe-bucket", timeout=2).status_code < 500:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        self.__exit__()
        raise RuntimeError("SeaweedFS S3 did not become ready within 60 s")

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
