"""The one parser of ``s3://BUCKET/KEY`` locations (standard library only: the Lambda writer
imports it too).

A location is ``s3://`` followed by a valid bucket name (3-63 of ``a-z0-9.-``, starting and ending
with a letter or digit) and an optional key; a key part ``..`` is refused. Anything else is a
``LocationError`` naming the text given, before any call to AWS.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ingestion.config.errors import LakehouseError

SCHEME = "s3://"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


class LocationError(LakehouseError):
    """An ``s3://`` location is malformed or cannot be read."""


class S3Uri(NamedTuple):
    bucket: str
    key: str  # no slash at either end; "" for the bucket itself


def is_s3(uri: str) -> bool:
    return uri.startswith(SCHEME)


def as_s3(uri: str) -> str:
    """An ``s3a://`` location (what Hadoop's S3A connector writes into Iceberg's metadata) as
    the same object's ``s3://`` location; any other text unchanged."""
    return SCHEME + uri[len("s3a://") :] if uri.startswith("s3a://") else uri


def parse_s3_uri(uri: str) -> S3Uri:
    """``s3://bucket/some/prefix/`` -> ``S3Uri("bucket", "some/prefix")``."""
    if not is_s3(uri):
        raise LocationError(f"{uri!r} is not an s3:// URI (expected s3://BUCKET/PREFIX)")
    bucket, _, key = uri[len(SCHEME) :].partition("/")
    if not _BUCKET.match(bucket) or ".." in key.split("/"):
        raise LocationError(f"{uri!r}: expected s3://BUCKET/KEY with a valid bucket name")
    return S3Uri(bucket, key.strip("/"))
