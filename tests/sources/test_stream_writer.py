"""The Lambda function on a table's stream (ingestion.sources.change_file_writer): plain Python, no
Spark.

S3 is moto's server on 127.0.0.1 (a test double for AWS only); the events are shaped like the
records Lambda receives from DynamoDB Streams (ingestion.samples.stream.stream_record).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import boto3
import local_s3
import pytest
from support import book

from ingestion.samples import stream as sample_stream
from ingestion.sources import change_file_writer, stream_files

BUCKET = "lakehouse-streams"


@pytest.fixture(scope="module")
def s3_endpoint():
    with local_s3.server() as endpoint:
        yield endpoint


@pytest.fixture
def s3(s3_endpoint):
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="eu-west-1")
    client.create_bucket(
        Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
    )
    yield client
    for item in client.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        client.delete_object(Bucket=BUCKET, Key=item["Key"])
    client.delete_bucket(Bucket=BUCKET)


def records() -> list[dict]:
    return [
        sample_stream.stream_record(
            "books", "INSERT", {"id": {"S": "b1"}}, None, book("b1", "A"), 1700000001, 101
        ),
        sample_stream.stream_record(
            "books",
            "MODIFY",
            {"id": {"S": "b1"}},
            book("b1", "A"),
            book("b1", "B"),
            1700000001,
            105,
        ),
        sample_stream.stream_record(
            "books", "REMOVE", {"id": {"S": "b2"}}, book("b2", "C"), None, 1700000002, 109
        ),
        sample_stream.stream_record(
            "books", "REMOVE", {"id": {"S": "b3"}}, book("b3", "D"), None, 1700000003, 113, ttl=True
        ),
    ]


def read_lines(body: bytes) -> list[dict]:
    return [json.loads(line) for line in gzip.decompress(body).decode().splitlines()]


def test_handler_writes_one_export_shaped_file_per_batch(s3, monkeypatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_STREAM_URI", f"s3://{BUCKET}/changes/")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.meta.endpoint_url)
    answer = change_file_writer.handler({"Records": records()})
    assert answer == {"batchItemFailures": []}
    listed = s3.list_objects_v2(Bucket=BUCKET)["Contents"]
    assert len(listed) == 1
    key = listed[0]["Key"]
    assert key.startswith("changes/books/20231114T221321Z-") and key.endswith(".json.gz")
    lines = read_lines(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    assert [line["eventName"] for line in lines] == ["INSERT", "MODIFY", "REMOVE", "REMOVE"]
    insert, modify, remove, ttl = lines
    assert insert["Keys"] == {"id": {"S": "b1"}} and insert["NewImage"] == book("b1", "A")
    assert "OldImage" not in insert
    assert modify["OldImage"] == book("b1", "A") and modify["NewImage"] == book("b1", "B")
    assert remove["OldImage"] == book("b2", "C") and "NewImage" not in remove
    assert "userIdentity" not in remove
    assert ttl["userIdentity"] == {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    assert modify["SequenceNumber"] == f"{105:021d}"
    assert modify["ApproximateCreationDateTime"] == 1700000001


def test_a_retried_batch_overwrites_and_names_sort_by_time(s3) -> None:
    uri = f"s3://{BUCKET}/p"
    first, failed = change_file_writer.write_batch(records(), uri, s3)
    again, _ = change_file_writer.write_batch(records(), uri, s3)
    assert failed is None and first == again
    later = [
        sample_stream.stream_record(
            "books", "INSERT", {"id": {"S": "b9"}}, None, book("b9", "Z"), 1700000100, 200
        )
    ]
    change_file_writer.write_batch(later, uri, s3)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert len(keys) == 2  # the retry overwrote its object
    store = stream_files.S3Prefix(uri, "books", s3)
    assert [f.name.split("-")[0] for f in sorted(store.listing(), key=lambda f: f.name)] == [
        "20231114T221321Z",
        "20231114T221500Z",
    ]
    store.delete([f.name for f in store.listing()])
    assert s3.list_objects_v2(Bucket=BUCKET).get("KeyCount") == 0


def test_a_bad_record_stops_the_batch_there(s3) -> None:
    batch = records()
    batch[2] = {"eventID": "x", "eventName": "MODIFY", "dynamodb": {"SequenceNumber": "109"}}
    written, failed = change_file_writer.write_batch(batch, f"s3://{BUCKET}/p", s3)
    assert failed == "109"  # Lambda retries from the bad record
    assert [w.records for w in written] == [2]
    body = s3.get_object(Bucket=BUCKET, Key=written[0].uri.split(f"{BUCKET}/", 1)[1])["Body"]
    assert [line["SequenceNumber"] for line in read_lines(body.read())] == [
        f"{101:021d}",
        f"{105:021d}",
    ]


def test_a_failed_write_reports_the_whole_batch(s3_endpoint, monkeypatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_STREAM_URI", "s3://no-such-bucket/p")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint)
    answer = change_file_writer.handler({"Records": records()})
    assert answer == {"batchItemFailures": [{"itemIdentifier": f"{101:021d}"}]}


def test_record_without_sequence_number_fails_the_whole_batch(tmp_path: Path) -> None:
    batch = records()
    batch[0]["dynamodb"].pop("SequenceNumber")
    written, failed = change_file_writer.write_batch(batch, str(tmp_path))
    assert written == [] and failed == ""  # "" : Lambda retries the whole batch


def test_local_folder_writes_are_atomic_and_complete(tmp_path: Path) -> None:
    written, failed = change_file_writer.write_batch(records(), str(tmp_path / "streams"))
    assert failed is None
    files = list((tmp_path / "streams" / "books").iterdir())
    assert [f.name for f in files] == [Path(written[0].uri).name]  # no temporary file left
    assert len(read_lines(files[0].read_bytes())) == 4


@pytest.mark.parametrize("uri", ["s3://Not_A_Bucket/changes", "s3://bucket/../changes", "s3:///x"])
def test_stream_locations_are_validated_before_any_call(uri: str) -> None:
    from ingestion.sources.locations import LocationError

    with pytest.raises(LocationError, match="expected s3://BUCKET/KEY"):
        stream_files.store_for(uri, "books")


@pytest.mark.parametrize(
    ("created", "precision", "written"),
    [
        (1767225600, None, 1767225600),
        (1767225600.0, None, 1767225600),  # a float Lambda may carry: integer seconds
        (1767225602.25, None, "1767225602.25"),  # a fraction: its exact text
        (1767225603123, "MILLISECOND", "1767225603.123"),
        (1767225604123456, "MICROSECOND", "1767225604.123456"),
        (1767225605000, "MILLISECOND", 1767225605),
    ],
)
def test_the_writer_normalises_the_creation_time(created, precision, written) -> None:
    record = sample_stream.stream_record(
        "books", "INSERT", {"id": {"S": "a"}}, None, {"id": {"S": "a"}}, created, 1
    )
    if precision:
        record["dynamodb"]["ApproximateCreationDateTimePrecision"] = precision
    line = change_file_writer.change_line(record)
    assert line["ApproximateCreationDateTime"] == written
    assert type(line["ApproximateCreationDateTime"]) is type(written)


@pytest.mark.parametrize(
    ("created", "precision"), [(-1, None), (True, None), ("1767225600", None), (1, "NANOSECOND")]
)
def test_a_creation_time_that_is_not_one_fails_the_record(created, precision) -> None:
    record = sample_stream.stream_record(
        "books", "INSERT", {"id": {"S": "a"}}, None, {"id": {"S": "a"}}, created, 1
    )
    if precision:
        record["dynamodb"]["ApproximateCreationDateTimePrecision"] = precision
    with pytest.raises(change_file_writer.StreamRecordError, match="ApproximateCreationDateTime"):
        change_file_writer.change_line(record)
