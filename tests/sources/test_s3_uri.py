"""One parser for every s3:// location: the export folders, the stream location, the Lambda
writer's destination, --to, --code and export_to all go through it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingestion.dynamodb.tables import TableConfigError, table_from_entry
from ingestion.sources import change_file_writer
from ingestion.sources.locations import S3Path
from ingestion.sources.s3_uri import LocationError, S3Uri, as_s3, parse_s3_uri
from ingestion.sources.stream_files import store_for


@pytest.mark.parametrize(
    ("uri", "parsed"),
    [
        ("s3://bucket/a/b/", S3Uri("bucket", "a/b")),
        ("s3://my.bucket-1/exports", S3Uri("my.bucket-1", "exports")),
        ("s3://bucket", S3Uri("bucket", "")),
    ],
)
def test_valid_locations(uri: str, parsed: S3Uri) -> None:
    assert parse_s3_uri(uri) == parsed
    assert (S3Path.parse(uri).bucket, S3Path.parse(uri).key) == parsed


@pytest.mark.parametrize(
    "uri", ["mybucket/exports", "https://b/p", "s3:///x", "s3://Bad_Bucket/x", "s3://bucket/../x"]
)
def test_malformed_locations_are_refused_before_any_call(uri: str) -> None:
    with pytest.raises(LocationError, match="s3://"):
        parse_s3_uri(uri)


def test_the_lambda_writer_refuses_a_location_that_is_not_s3(tmp_path: Path) -> None:
    # One parser: "https://b/p" is not taken apart as bucket ":", "s3:///x" is no traceback; a
    # destination with a scheme is s3:// or an error naming it.
    with pytest.raises(LocationError, match="https://b/p"):
        change_file_writer.put("https://b/p", "books", "x.json.gz", b"")
    written = change_file_writer.put(str(tmp_path), "books", "x.json.gz", b"data")
    assert Path(written).read_bytes() == b"data"


def test_stream_locations_and_export_to_use_the_same_parser() -> None:
    with pytest.raises(LocationError):
        store_for("s3:///x", "books")
    with pytest.raises(TableConfigError, match="export_to must be s3://BUCKET/PREFIX"):
        table_from_entry("books", {"partition_key": "id:S", "export_to": "s3://Bad_Bucket/x"})


def test_an_s3a_location_is_the_same_objects_s3_location() -> None:
    """Iceberg's metadata written through Hadoop's S3A says s3a://; the readers without Spark
    (boto3, DuckDB) need s3:// for the same object."""
    assert as_s3("s3a://bucket/wh/t/metadata/v1.json") == "s3://bucket/wh/t/metadata/v1.json"
    assert as_s3("s3://bucket/key") == "s3://bucket/key"
    assert as_s3("/tmp/wh/t/metadata/v1.json") == "/tmp/wh/t/metadata/v1.json"
    assert parse_s3_uri(as_s3("s3a://bucket/a/b")) == ("bucket", "a/b")
