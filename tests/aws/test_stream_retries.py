"""No stream change dropped: the stream mapping retries a batch the writer cannot write until it
is written (docs/decisions/0010-stream-retries.md).

``poll`` is the test double of Lambda's poller for a DynamoDB stream mapping, as AWS's Lambda
developer guide describes it (batches in sequence order; a batch that reports item failures is
retried from its first failed record; past ``MaximumRetryAttempts``, unless it is -1, only the
batch's metadata goes to the on-failure destination and the shard moves on). The writer is the
real function's handler, writing to moto's S3 server (a test double for AWS only) through a
bucket that is missing while the outage lasts; the change files then go through `sync`
(copied to a folder: reading them on `s3://` is tests/staging/test_streams_s3.py's).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import local_s3
import pytest
from support import final_ids

from ingestion import cli
from ingestion.aws import deployment
from ingestion.dynamodb.tables import load_tables
from ingestion.samples import stream as sample_stream
from ingestion.sources import change_file_writer

BUCKET = "lake-streams"
# A mapping capped at ten retries: after them the records are gone for good.
CAPPED = {"BatchSize": 1000, "MaximumRetryAttempts": 10}


def poll(
    records: list[dict[str, Any]],
    mapping: dict[str, Any],
    invoke: Callable[[dict[str, Any]], dict[str, Any]],
    give_up_after: int = 100,
) -> list[dict[str, Any]]:
    """Deliver ``records`` (one shard) as Lambda does under ``mapping``; return what went to
    the on-failure destination. ``give_up_after`` only bounds the test."""
    dropped: list[dict[str, Any]] = []
    start, attempts = 0, 0
    for _ in range(give_up_after):
        if start >= len(records):
            return dropped
        batch = records[start : start + mapping["BatchSize"]]
        failed = [f["itemIdentifier"] for f in invoke({"Records": batch})["batchItemFailures"]]
        if not failed:
            start, attempts = start + len(batch), 0
            continue
        numbers = [r["dynamodb"]["SequenceNumber"] for r in batch]
        start += min(numbers.index(f) if f in numbers else 0 for f in failed)
        attempts += 1
        cap = mapping["MaximumRetryAttempts"]
        if cap != deployment.RETRY_FOREVER and attempts > cap:
            left = records[start : start + mapping["BatchSize"]]
            dropped.append(
                {
                    "DDBStreamBatchInfo": {
                        "startSequenceNumber": left[0]["dynamodb"]["SequenceNumber"],
                        "endSequenceNumber": left[-1]["dynamodb"]["SequenceNumber"],
                        "batchSize": len(left),
                    }
                }
            )
            start, attempts = start + len(left), 0
    raise AssertionError(f"still failing after {give_up_after} invocations")


def _records() -> list[dict[str, Any]]:
    def book(key: str, sequence: int) -> dict[str, Any]:
        image = {"id": {"S": key}, "title": {"S": f"title {key}"}}
        return sample_stream.stream_record(
            "books", "INSERT", {"id": {"S": key}}, None, image, 1769000000 + sequence, sequence
        )

    return [book(f"b{n}", n) for n in range(1, 6)]


def _outage(endpoint: str, failing: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The real handler, whose bucket is missing (every write fails: NoSuchBucket) for the
    first ``failing`` invocations, then there."""
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    calls = [0]

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        calls[0] += 1
        if calls[0] == failing + 1:
            s3.create_bucket(Bucket=BUCKET)
        return change_file_writer.handler(event)

    return invoke


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch):
    with local_s3.server() as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", url)
        monkeypatch.setenv("LAKEHOUSE_STREAM_URI", f"s3://{BUCKET}/streams")
        yield url


def _rendered_mapping() -> dict[str, Any]:
    template = deployment.render(list(load_tables().values()))
    return template["Resources"]["BooksStreamMapping"]["Properties"]


def test_the_mapping_retries_without_a_cap_and_the_alarms_say_how_long() -> None:
    """Ten retries, then Lambda sent only a batch's metadata to the queue and moved on: a few
    minutes of S3 errors lost changes for good, and nothing replayed them."""
    mapping = _rendered_mapping()
    assert mapping["MaximumRetryAttempts"] == mapping["MaximumRecordAgeInSeconds"] == -1
    resources = deployment.render(list(load_tables().values()))["Resources"]
    behind = resources["StreamBehindAlarm"]["Properties"]
    at_risk = resources["StreamAtRiskAlarm"]["Properties"]
    assert behind["MetricName"] == at_risk["MetricName"] == "IteratorAge"
    assert behind["Threshold"] == 60_000  # late: minutes
    # Half the stream's 24-hour retention: hours left before a change is lost.
    assert at_risk["Threshold"] == 12 * 3600 * 1000
    dropped = resources["StreamFailuresAlarm"]["Properties"]
    assert dropped["Dimensions"][0]["Value"] == {"Fn::GetAtt": ["StreamFailures", "QueueName"]}


def test_an_outage_longer_than_the_old_cap_lost_the_changes(endpoint: str) -> None:
    dropped = poll(_records(), CAPPED, _outage(endpoint, failing=15))
    assert dropped == [
        {
            "DDBStreamBatchInfo": {
                "startSequenceNumber": f"{1:021d}",
                "endSequenceNumber": f"{5:021d}",
                "batchSize": 5,
            }
        }
    ]
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)  # the outage ends: the shard has moved on
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)  # the changes were never written


@pytest.mark.slow
@pytest.mark.integration
def test_after_an_outage_every_change_reaches_the_final_table(
    endpoint: str, spark, clean_lakehouse, tmp_path: Path
) -> None:
    """The same outage under the rendered mapping: retried until written, nothing dropped,
    every change merged by `sync`."""
    assert poll(_records(), _rendered_mapping(), _outage(endpoint, failing=15)) == []
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    local = tmp_path / "streams"
    for item in s3.list_objects_v2(Bucket=BUCKET)["Contents"]:
        target = local / item["Key"].split("/", 1)[1]
        target.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(BUCKET, item["Key"], str(target))
    assert cli.main(["sync", "--table", "books", "--stream", str(local), "--settle", "0"]) == 0
    assert final_ids(spark) == ["b1", "b2", "b3", "b4", "b5"]
