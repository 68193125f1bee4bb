"""Each backend page's "five lines", run as printed against a real server, configured only through ``RAVI_*``
variables as the page says (a user who has only that page can follow it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

from servers import Server

PAGES = Path(__file__).parents[1] / "docs" / "backends"


def five_lines(page: str) -> str:
    text = (PAGES / f"{page}.md").read_text()
    after = text.split("**The five lines**", 1)[1]
    block = re.search(r"```python\n(.*?)```", after, re.S)
    assert block is not None, f"{page}.md has no python block after its five lines"
    return block.group(1)


def run_page(page: str, tmp_path: Path, **settings: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAVI_")}
    env.update(settings)
    done = subprocess.run(
        [sys.executable, "-c", five_lines(page)],
        cwd=tmp_path,  # no ravi.toml here: the variables are the whole configuration
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2_000:]
    return done.stdout


def test_the_postgres_page(postgres_server: Server, pg_schema: str, tmp_path: Path) -> None:
    out = run_page(
        "postgres", tmp_path,
        RAVI_HISTORY__BACKEND="postgres", RAVI_HISTORY__DSN=postgres_server.address, RAVI_HISTORY__SCHEMA=pg_schema,
    )  # fmt: skip
    assert "My invoice INV-2291 is wrong." in out


def test_the_redis_page(redis_server: Server, redis_prefix: str, tmp_path: Path) -> None:
    out = run_page(
        "redis", tmp_path,
        RAVI_HISTORY__BACKEND="redis", RAVI_HISTORY__URL=redis_server.address, RAVI_HISTORY__PREFIX=redis_prefix,
    )  # fmt: skip
    assert "My invoice INV-2291 is wrong." in out


def test_the_redis_page_over_tls(redis_mtls_server: Server, redis_prefix: str, tmp_path: Path) -> None:
    """The same five lines against a server that speaks TLS only and asks for a client certificate, with the URL
    form the page's TLS section gives, in ``RAVI_HISTORY__URL`` alone."""
    assert redis_mtls_server.tls is not None
    files = redis_mtls_server.tls
    query = urlencode({"ssl_ca_certs": files.ca, "ssl_certfile": files.cert, "ssl_keyfile": files.key})
    out = run_page(
        "redis", tmp_path,
        RAVI_HISTORY__BACKEND="redis", RAVI_HISTORY__URL=f"{redis_mtls_server.address}?{query}",
        RAVI_HISTORY__PREFIX=redis_prefix,
    )  # fmt: skip
    assert "My invoice INV-2291 is wrong." in out


def test_the_s3_page(s3_server: Server, s3_bucket: str, tmp_path: Path) -> None:
    assert s3_server.credentials is not None
    access, secret = s3_server.credentials
    out = run_page(
        "s3", tmp_path,
        RAVI_BLOB__BACKEND="s3", RAVI_BLOB__BUCKET=s3_bucket, RAVI_BLOB__ENDPOINT_URL=s3_server.address,
        RAVI_BLOB__ACCESS_KEY=access, RAVI_BLOB__SECRET_KEY=secret, RAVI_BLOB__ADDRESSING_STYLE="path",
        RAVI_BLOB__CREATE_BUCKET="true",
    )  # fmt: skip
    assert "b'revenue up 4%'" in out


def test_the_age_page(age_dsn: str, age_graph: str, tmp_path: Path) -> None:
    out = run_page("age", tmp_path, RAVI_GRAPH__BACKEND="age", RAVI_GRAPH__DSN=age_dsn, RAVI_GRAPH__GRAPH=age_graph)
    assert "alice" in out and "acme" in out and "WORKS_AT" in out
