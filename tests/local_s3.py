"""A local S3 endpoint for the tests: moto's server on 127.0.0.1 (a test double for AWS only)."""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from moto.server import ThreadedMotoServer

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


@contextmanager
def server() -> Iterator[str]:
    """Start moto's server on a free port of 127.0.0.1 with dummy credentials; yield its URL.

    moto keeps its fake AWS state per process, not per server: it is reset here, so every
    test starts with no bucket, table or database."""
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    urllib.request.urlopen(
        urllib.request.Request(f"http://{host}:{port}/moto-api/reset", method="POST"), timeout=30
    ).close()
    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    try:
        yield f"http://{host}:{port}"
    finally:
        moto.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
