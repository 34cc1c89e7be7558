"""``s3://`` locations with the part of ``pathlib.Path`` that reading an export needs.

Manifests are small: they are read with boto3 here. Data files are read by Spark through their
``s3://`` URI (EMRFS on EMR, S3A elsewhere). ``AWS_ENDPOINT_URL_S3`` points boto3 at an
S3-compatible endpoint (the tests use moto's server on 127.0.0.1).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, BinaryIO

from ingestion.config import settings
from ingestion.sources.s3_uri import LocationError, parse_s3_uri

__all__ = ["LocationError", "S3Path", "s3_client"]


def s3_client() -> Any:
    """One boto3 S3 client per endpoint (``AWS_ENDPOINT_URL_S3``, else AWS's) and region (the
    job's, ``settings.aws_region``)."""
    return _client_for(os.environ.get("AWS_ENDPOINT_URL_S3") or None, settings.aws_region())


@lru_cache(maxsize=4)
def _client_for(endpoint: str | None, region: str | None) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, region_name=region)


@dataclass(frozen=True)
class S3Path:
    bucket: str
    key: str  # no leading or trailing slash
    client: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def parse(cls, uri: str, client: Any = None) -> S3Path:
        bucket, key = parse_s3_uri(uri)
        return cls(bucket, key, client)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def __truediv__(self, part: str) -> S3Path:
        key = "/".join(p for p in (self.key, part.strip("/")) if p)
        return S3Path(self.bucket, key, self.client)

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def parent(self) -> S3Path:
        return S3Path(
            self.bucket, self.key.rsplit("/", 1)[0] if "/" in self.key else "", self.client
        )

    def resolve(self) -> S3Path:
        return self

    def _client(self) -> Any:
        return self.client or s3_client()

    def is_file(self) -> bool:
        from botocore.exceptions import ClientError

        try:
            self._client().head_object(Bucket=self.bucket, Key=self.key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise LocationError(f"{self}: {exc}") from exc
        return True

    def open(self, mode: str = "rb") -> BinaryIO:
        if mode != "rb":
            raise LocationError(f"{self}: only reading is supported")
        body: BinaryIO = self._client().get_object(Bucket=self.bucket, Key=self.key)["Body"]
        return body

    def read_bytes(self) -> bytes:
        handle = self.open()
        try:
            return handle.read()
        finally:
            handle.close()

    def read_text(self) -> str:
        return self.read_bytes().decode("utf-8")
