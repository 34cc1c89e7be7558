"""`export`: windows from the ledger, idempotent requests, refusal while an export runs, waiting.

DynamoDB's control plane is a test double: moto's server on 127.0.0.1 for the calls it supports
(its export writes only a simplified snapshot without manifests), botocore's Stubber where a test
needs an exact request or an answer moto cannot give (an export in progress, a failure).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
import local_s3
import pytest
from botocore.stub import ANY, Stubber

from ingestion import cli
from ingestion.catalog import ledger
from ingestion.sources import export_control as exports
from ingestion.sources import manifest, recovery
from ingestion.sources.manifest import FULL, INCREMENTAL, ExportError
from ingestion.staging import chain

ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/orders"
T = datetime(2026, 3, 1, 10, 7, tzinfo=UTC)  # incremental windows start on whole minutes


def stubbed():
    client = boto3.client(
        "dynamodb", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    return client, Stubber(client)


def test_the_first_window_after_a_full_export_overlaps_it_by_under_a_minute() -> None:
    """A full export's time has milliseconds; windows start on a whole minute before it (a
    window starting after it would leave a gap, and AWS's windows fall on whole minutes)."""
    full_time = T + timedelta(minutes=3, seconds=50, milliseconds=622)  # 10:10:50.622
    windows = exports.incremental_windows(full_time, full_time + timedelta(hours=2))
    assert windows[0].start == datetime(2026, 3, 1, 10, 10, tzinfo=UTC)
    assert all(w.start.second == 0 and w.start.microsecond == 0 for w in windows)


def test_windows_split_a_backlog_and_leave_a_short_remainder() -> None:
    windows = exports.incremental_windows(T, T + timedelta(hours=30, minutes=20))
    assert [(w.start, w.end) for w in windows] == [
        (T, T + timedelta(hours=24)),
        (T + timedelta(hours=24), datetime(2026, 3, 2, 16, 15, tzinfo=UTC)),
    ]
    assert (
        exports.incremental_windows(T, T + timedelta(minutes=20)) == []
    )  # < 15 min after rounding
    with pytest.raises(ExportError, match="beyond point-in-time recovery"):
        exports.plan(ARN, "b", "p", INCREMENTAL, T, T + timedelta(days=36))
    with pytest.raises(ExportError, match="start with a full export"):
        exports.plan(ARN, "b", "p", INCREMENTAL, None, T)


def test_a_retry_in_the_same_slot_is_the_same_request() -> None:
    first = exports.plan(
        ARN, "bucket", "exports", INCREMENTAL, T, T + timedelta(hours=2, minutes=55)
    )
    retry = exports.plan(
        ARN, "bucket", "exports", INCREMENTAL, T, T + timedelta(hours=3, minutes=6)
    )
    later = exports.plan(
        ARN, "bucket", "exports", INCREMENTAL, T, T + timedelta(hours=3, minutes=31)
    )
    assert first == retry and first[0].client_token == retry[0].client_token
    assert later[0].client_token != first[0].client_token
    client, stub = stubbed()
    for request in (first[0], retry[0]):
        stub.add_response("list_exports", {"ExportSummaries": []}, {"TableArn": ARN})
        stub.add_response(
            "export_table_to_point_in_time",
            {"ExportDescription": {"ExportArn": ARN + "/export/1"}},
            {**request.parameters(), "ClientToken": first[0].client_token},
        )
    with stub:
        assert exports.start(client, first[0]) == exports.start(client, retry[0])
        stub.assert_no_pending_responses()


def test_refuses_while_an_export_is_in_progress() -> None:
    client, stub = stubbed()
    running = {"ExportArn": ARN + "/export/running", "ExportStatus": "IN_PROGRESS"}
    stub.add_response("list_exports", {"ExportSummaries": [running]}, {"TableArn": ARN})
    described = {"ExportArn": running["ExportArn"], "S3Prefix": "p"}  # sync's own prefix
    stub.add_response("describe_export", {"ExportDescription": described}, {"ExportArn": ANY})
    request = exports.plan(ARN, "b", "p", FULL, None, T)[0]
    with stub, pytest.raises(exports.ExportInProgress, match="export/running is still in progress"):
        exports.start(client, request)  # no export_table_to_point_in_time call was queued


def test_sync_and_verify_exports_never_wait_for_each_other() -> None:
    """A verify export in progress (under its own prefix) does not block a sync export, nor a
    sync export a verify one; each kind still waits for its own."""
    client, stub = stubbed()
    verify_prefix = f"p/{exports.VERIFY_PREFIX}"
    running = [
        {"ExportArn": ARN + "/export/verifying", "ExportStatus": "IN_PROGRESS"},
        {"ExportArn": ARN + "/export/done", "ExportStatus": "COMPLETED"},
    ]
    sync_request = exports.plan(ARN, "b", "p", FULL, None, T)[0]
    verify_request = exports.plan(ARN, "b", verify_prefix, FULL, None, T)[0]
    assert sync_request.client_token != verify_request.client_token
    for request, answer in ((sync_request, "started"), (verify_request, None)):
        stub.add_response("list_exports", {"ExportSummaries": running}, {"TableArn": ARN})
        described = {"ExportArn": running[0]["ExportArn"], "S3Prefix": verify_prefix}
        stub.add_response(
            "describe_export",
            {"ExportDescription": described},
            {"ExportArn": ARN + "/export/verifying"},
        )
        if answer:
            stub.add_response(
                "export_table_to_point_in_time",
                {"ExportDescription": {"ExportArn": ARN + "/export/" + answer}},
                request.parameters(),
            )
    with stub:
        assert exports.start(client, sync_request) == ARN + "/export/started"
        with pytest.raises(exports.ExportInProgress, match="before verifying again"):
            exports.start(client, verify_request)
        stub.assert_no_pending_responses()
    assert exports.is_verify_folder(f"s3://b/{verify_prefix}/AWSDynamoDB/0123-abc")
    assert not exports.is_verify_folder("s3://b/p/AWSDynamoDB/0123-abc")
    assert exports.verify_destination("s3://b/p/") == f"s3://b/{verify_prefix}"


def test_a_chain_that_cannot_continue_says_why() -> None:
    """Beyond 35 days (no call needed), or recovery switched off and on again since the last
    applied export: each a reason (a heal can restart the chain); recovery off: an error (not even
    a heal can export); recovery on since before it: none."""
    now = T + timedelta(days=3)
    assert "beyond point-in-time recovery" in (
        recovery.chain_break(None, ARN, T, T + timedelta(days=36)) or ""
    )
    client, stub = stubbed()
    for status, earliest in (
        ("DISABLED", None),
        ("ENABLED", T + timedelta(days=1)),
        ("ENABLED", T - timedelta(days=1)),
    ):
        pitr: dict = {"PointInTimeRecoveryStatus": status}
        if earliest:
            pitr["EarliestRestorableDateTime"] = earliest
        answer = {"ContinuousBackupsStatus": "ENABLED", "PointInTimeRecoveryDescription": pitr}
        stub.add_response(
            "describe_continuous_backups",
            {"ContinuousBackupsDescription": answer},
            {"TableName": ARN},
        )
    with stub:
        with pytest.raises(
            ExportError,
            match="point-in-time recovery of orders is DISABLED: exports need it. Turn it on",
        ):
            recovery.chain_break(client, ARN, T, now)  # not even a heal can export
        reason = recovery.chain_break(client, ARN, T, now) or ""
        assert "before the earliest restorable time of orders" in reason
        assert recovery.chain_break(client, ARN, T, now) is None
    # An AWS refusal is one line of the error family, naming the call.
    stub.add_client_error("describe_continuous_backups", "AccessDeniedException", "not allowed")
    with (
        stub,
        pytest.raises(
            ExportError, match="DescribeContinuousBackups: AccessDeniedException: not allowed"
        ),
    ):
        recovery.chain_break(client, ARN, T, now)


def test_wait_reports_progress_and_fails_clearly() -> None:
    client, stub = stubbed()
    arn = ARN + "/export/1"
    stub.add_response(
        "describe_export",
        {"ExportDescription": {"ExportArn": arn, "ExportStatus": "IN_PROGRESS"}},
        {"ExportArn": arn},
    )
    stub.add_response(
        "describe_export",
        {
            "ExportDescription": {
                "ExportArn": arn,
                "ExportStatus": "COMPLETED",
                "ItemCount": 7,
                "ExportManifest": "exports/AWSDynamoDB/0123-abcd/manifest-summary.json",
            }
        },
        {"ExportArn": arn},
    )
    stub.add_response(
        "describe_export",
        {
            "ExportDescription": {
                "ExportArn": arn,
                "ExportStatus": "FAILED",
                "FailureCode": "S3NoSuchBucket",
                "FailureMessage": "no bucket",
            }
        },
        {"ExportArn": ANY},
    )
    lines: list[str] = []
    with stub:
        done = exports.wait(client, arn, poll_seconds=0, report=lines.append)
        assert exports.export_folder("bucket", done) == "s3://bucket/exports/AWSDynamoDB/0123-abcd"
        with pytest.raises(ExportError, match=r"FAILED \(S3NoSuchBucket\): no bucket"):
            exports.wait(client, arn, poll_seconds=0, report=lines.append)
    assert lines[0].endswith("IN_PROGRESS, 0s so far") and "COMPLETED" in lines[1]
    assert "7 items" in lines[1]


def test_wait_past_its_timeout_says_to_run_again() -> None:
    """The one polling loop's timeout (config.polling), worded for an export; Stubber stands in
    for DynamoDB."""
    client, stub = stubbed()
    arn = ARN + "/export/2"
    stub.add_response(
        "describe_export",
        {"ExportDescription": {"ExportArn": arn, "ExportStatus": "IN_PROGRESS"}},
        {"ExportArn": arn},
    )
    with (
        stub,
        pytest.raises(
            ExportError,
            match=r"export/2: still IN_PROGRESS after \d+s; run the same command again later",
        ),
    ):
        exports.wait(client, arn, poll_seconds=0, timeout_seconds=-1, report=print)


def test_export_against_moto(monkeypatch, capsys) -> None:
    """The real calls against moto's DynamoDB and S3: the export starts and completes; moto
    writes no manifest, so finding its files fails with a clear error (the reading of real
    exports on s3:// is tested with the project's AWS-format samples)."""
    with local_s3.server() as endpoint:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
        dynamodb = boto3.client("dynamodb")
        arn = dynamodb.create_table(
            TableName="orders",
            KeySchema=[{"AttributeName": "customer_id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "customer_id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )["TableDescription"]["TableArn"]
        dynamodb.update_continuous_backups(
            TableName="orders",
            PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
        )
        dynamodb.put_item(TableName="orders", Item={"customer_id": {"S": "c1"}})
        boto3.client("s3").create_bucket(
            Bucket="exports", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
        )
        request = exports.plan(arn, "exports", "ddb", FULL, None)[0]
        export_arn = exports.start(dynamodb, request)
        done = exports.wait(dynamodb, export_arn, poll_seconds=0.2, report=lambda _: None)
        assert done["ExportStatus"] == "COMPLETED" and done["ItemCount"] == 1
        with pytest.raises(ExportError, match="without an ExportManifest"):
            exports.export_folder("exports", done)
        assert exports.exports_in_progress(dynamodb, arn) == []


@pytest.mark.slow
def test_the_next_window_starts_where_the_ledger_ends(spark, clean_lakehouse, samples) -> None:
    from ingestion.dynamodb.tables import get_table
    from ingestion.staging.exports import ingest_export

    ingest_export(spark, get_table("orders"), str(samples["orders"]))
    export_time = manifest.read_export(samples["orders"], verify=False).export_time
    last_end = chain.last_export_end(ledger.entries(spark, "orders"))
    assert last_end == export_time
    requests = exports.plan(ARN, "b", "p", INCREMENTAL, last_end, last_end + timedelta(hours=2))
    # the minute the export was taken in: an overlap of under a minute, never a gap
    assert requests[0].window is not None
    assert requests[0].window.start == export_time.replace(second=0, microsecond=0)


def test_export_needs_an_arn_and_a_destination(capsys) -> None:
    assert cli.main(["export", "--table", "orders", "--incremental"]) == 2
    assert "needs its table ARN and an s3:// destination" in capsys.readouterr().err
    assert cli.main(["sync", "--table", "orders", "--heal"]) == 2
    assert (
        "--heal takes a full export from DynamoDB: add --from-dynamodb" in capsys.readouterr().err
    )
