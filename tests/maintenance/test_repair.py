"""`verify --repair` and `sync --from-dynamodb --heal`: a full export staged as a re-baseline makes
the final table equal to it, while changes newer than it still win by version; through the
command line, on real Spark, Iceberg and dbt. DynamoDB's and CloudWatch's control planes are
botocore's Stubber (each request checked against botocore's model of the API); a completed
export's files are read from their local copy (reading exports on s3:// is
tests/sources/test_exports_s3.py's)."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import ANY
from items_back import final_items
from support import copy_project
from verifying import ARN, export_items, key, stubbed, synced, verified

from ingestion import cli
from ingestion.config import clock
from ingestion.dynamodb.tables import get_table
from ingestion.jobs import inspection, sync
from ingestion.merge import runner
from ingestion.samples import sample_exports
from ingestion.samples import stream as sample_stream
from ingestion.sources import export_control, manifest
from ingestion.sources.change_file_writer import write_batch
from ingestion.staging import streams
from ingestion.staging.exports import ingest_export

pytestmark = pytest.mark.slow


def order_key(item: dict[str, Any]) -> dict[str, Any]:
    return {"customer_id": item["customer_id"], "order_id": item["order_id"]}


def key_of(item: dict[str, Any]) -> str:
    return key(item["customer_id"]["S"], item["order_id"]["S"])


def final_images(spark: Any) -> dict[str, dict[str, Any]]:
    return {key_of(image): image for image, _ in final_items(spark, "orders")}


def outage(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """DynamoDB's items after changes the lakehouse never got: one item inserted, one deleted,
    one updated; and the key of each."""
    inserted = dict(items[0], order_id={"S": "never-arrived"})
    updated = dict(items[2], status={"S": "changed while nobody listened"})
    after = [inserted, items[0], updated, *items[3:]]  # items[1] deleted
    return after, {
        "missing": key_of(inserted),
        "extra": key_of(items[1]),
        "different": key_of(updated),
    }


def test_repair_makes_the_table_equal_and_newer_changes_still_win(
    spark, clean_lakehouse, samples, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table synced from a full export at T, then an incremental export up to T + 1 h and a
    stream change at T + 2 h. DynamoDB's full export at T + 30 min holds three changes the
    lakehouse never got. `verify --repair` stages it (older than the applied incremental: a
    re-baseline), says which keys it changed, and verifies equal; the incremental's and the
    stream's changes, newer than it, stay."""
    synced(spark, samples["orders"])
    items = export_items(samples["orders"])
    start = manifest.read_export(samples["orders"]).export_time
    assert start is not None
    # An incremental export after the full one: items[3] updated (lands at the window's end).
    late = dict(items[3], status={"S": "changed by the incremental"})
    line = {
        "Metadata": {"WriteTimestampMicros": {"N": str(clock.epoch_micros(start) + 10**9)}},
        "Keys": order_key(items[3]),
        "OldImage": items[3],
        "NewImage": late,
    }
    window = (start.replace(second=0, microsecond=0), start + timedelta(hours=1))
    incremental = sample_exports.write_incremental_export(tmp_path, "orders", [line], window)
    ingest_export(spark, get_table("orders"), str(incremental))
    # A stream change newer than the export to come: items[4] updated at T + 2 h.
    streamed = dict(items[4], status={"S": "changed by the stream"})
    seconds = start.timestamp() + 7200
    record = sample_stream.stream_record(
        "orders", "MODIFY", order_key(items[4]), items[4], streamed, seconds, 1
    )
    write_batch([record], str(tmp_path / "stream"))
    streams.ingest_stream(spark, get_table("orders"), str(tmp_path / "stream"), settle_seconds=0)
    runner.run_merge(spark, [get_table("orders")], test=False)
    # DynamoDB at T + 30 min: the outage's three changes, items[3] and items[4] as they were.
    truth, lost = outage(items)
    repair_at = start + timedelta(minutes=30)
    export = sample_exports.write_items_export(tmp_path / "truth", "orders", truth, repair_at)

    code, report = verified(export, capsys)
    assert code == 1
    assert report["counts"] == {
        "equal": 56,
        "missing": 1,
        "extra": 1,
        "different": 1,
        "duplicate": 0,
        "not_comparable": 2,  # items[3] and items[4]: changed after T + 30 min, export not staged
    }
    assert cli.main(["verify", "--table", "orders", str(export), "--repair"]) == 0
    printed = capsys.readouterr().out
    assert (
        f"repairing: 1 key(s) inserted (first: {lost['missing']}), 1 key(s) deleted (first: "
        f"{lost['extra']}), 1 key(s) updated (first: {lost['different']})"
    ) in printed
    assert "staged as a re-baseline (--repair)" in printed
    after = printed[printed.index("after the repair:") :]
    assert "| equal          | 60" in after and "EQUAL in" in after and "NOT EQUAL" not in after
    final = final_images(spark)
    assert final[lost["missing"]]["order_id"] == {"S": "never-arrived"}
    assert lost["extra"] not in final
    assert final[lost["different"]]["status"] == {"S": "changed while nobody listened"}
    assert final[key_of(items[3])]["status"] == {"S": "changed by the incremental"}
    assert final[key_of(items[4])]["status"] == {"S": "changed by the stream"}
    code, report = verified(export, capsys)
    assert code == 0 and report["counts"]["equal"] == 60 and report["counts"]["not_comparable"] == 0
    # Against the older export: items[1], deleted by the repair's baseline rule after its instant
    # with no staged change of its own, is not comparable, never missing.
    code, report = verified(samples["orders"], capsys)
    assert report["counts"]["missing"] == 0 and lost["extra"] in report["first"]["not_comparable"]


def test_repair_as_json_keeps_the_report_before_it(
    spark, clean_lakehouse, samples, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    synced(spark, samples["orders"])
    truth, lost = outage(export_items(samples["orders"]))
    start = manifest.read_export(samples["orders"]).export_time
    assert start is not None
    export = sample_exports.write_items_export(
        tmp_path / "truth", "orders", truth, start + timedelta(minutes=30)
    )
    code, report = verified(export, capsys, "--repair")
    assert code == 0 and report["equal"] is True and report["counts"]["equal"] == 60
    before = report["before_repair"]
    assert before["equal"] is False and before["export"] == report["export"]
    assert before["first"]["missing"] == [lost["missing"]]
    assert before["first"]["extra"] == [lost["extra"]]
    assert before["different_attributes"] == {lost["different"]: ["status"]}


def test_what_cannot_repair_is_refused(
    spark, clean_lakehouse, samples, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    synced(spark, samples["orders"])
    items = export_items(samples["orders"])
    spark.sql(f"delete from lake.lakehouse.orders where order_id = '{items[0]['order_id']['S']}'")
    # The export already staged: its rows are no newer than what they made.
    assert cli.main(["verify", "--table", "orders", str(samples["orders"]), "--repair"]) == 2
    assert "already staged, as the table's baseline" in capsys.readouterr().err
    # An export older than the staged full export: its baseline rule would delete what it restores.
    start = manifest.read_export(samples["orders"]).export_time
    assert start is not None
    older = sample_exports.write_items_export(tmp_path, "orders", items, start - timedelta(hours=1))
    assert cli.main(["verify", "--table", "orders", str(older), "--repair"]) == 2
    assert "not newer than the table's newest staged full export" in capsys.readouterr().err
    window = (start.replace(second=0, microsecond=0), start + timedelta(hours=1))
    incremental = sample_exports.write_incremental_export(tmp_path / "inc", "orders", [], window)
    assert cli.main(["verify", "--table", "orders", str(incremental), "--repair"]) == 2
    assert "only a full export can repair a table" in capsys.readouterr().err
    # A verify export is staged only by --repair: sync and ingest refuse it before any work.
    written = sample_exports.write_items_export(
        tmp_path, "orders", items, start + timedelta(hours=1)
    )
    taken = tmp_path / export_control.VERIFY_PREFIX / "AWSDynamoDB" / written.name
    shutil.move(written, taken)  # as verify --from-dynamodb's export lies
    assert cli.main(["sync", "--table", "orders", str(taken)]) == 2
    assert "--repair" in capsys.readouterr().err
    assert cli.main(["verify", "--table", "orders", "--from-dynamodb", str(taken)]) == 2
    assert "an export folder or --from-dynamodb" in capsys.readouterr().err


def completed(
    stub: Any, request: dict[str, Any], bucket_key: str, items: int, verifying: str = ""
) -> None:
    """DynamoDB's answers to ``request``, one export that completes at once (its manifest at
    ``bucket_key``): the exports in progress (``verifying``: a verify export's prefix, when one
    runs), the request itself (exactly), a COMPLETED status."""
    arn = f"{ARN}/export/{bucket_key.split('/')[-2]}"
    running = [{"ExportArn": f"{ARN}/export/verifying", "ExportStatus": "IN_PROGRESS"}]
    stub.add_response(
        "list_exports", {"ExportSummaries": running if verifying else []}, {"TableArn": ARN}
    )
    if verifying:
        described = {"ExportArn": running[0]["ExportArn"], "S3Prefix": verifying}
        stub.add_response(
            "describe_export",
            {"ExportDescription": described},
            {"ExportArn": running[0]["ExportArn"]},
        )
    stub.add_response(
        "export_table_to_point_in_time", {"ExportDescription": {"ExportArn": arn}}, request
    )
    answer = {
        "ExportArn": arn,
        "ExportStatus": "COMPLETED",
        "ItemCount": items,
        "ExportManifest": bucket_key,
    }
    stub.add_response("describe_export", {"ExportDescription": answer}, {"ExportArn": arn})


def exported_locally(monkeypatch: pytest.MonkeyPatch, folders: dict[str, Path]) -> None:
    """A completed export's s3:// folder (export_control.export_folder, unchanged) read from its
    local copy."""
    real = export_control.export_folder

    def local(bucket: str, description: dict[str, Any]) -> str:
        return str(folders[real(bucket, description)])

    monkeypatch.setattr(export_control, "export_folder", local)


def export_request(prefix: str) -> dict[str, Any]:
    """The full export request of ``orders`` to ``s3://exports-bucket/<prefix>``, exactly."""
    return {
        "TableArn": ARN,
        "S3Bucket": "exports-bucket",
        "S3Prefix": prefix,
        "ExportFormat": "DYNAMODB_JSON",
        "ExportType": "FULL_EXPORT",
        "ClientToken": ANY,
        "ExportTime": ANY,
    }


def all_equal_metrics(items: int) -> dict[str, Any]:
    """The PutMetricData request of a verify of ``orders`` that found ``items`` equal items."""
    names = ("Differences", "Missing", "Extra", "Different", "Duplicate", "NotComparable", "Equal")
    data = [
        {
            "MetricName": f"Verify{name}",
            "Dimensions": [{"Name": "Table", "Value": "orders"}],
            "Value": float(items) if name == "Equal" else 0.0,
            "Unit": "Count",
        }
        for name in names
    ]
    return {"Namespace": "DynamoDBLakehouse", "MetricData": data}


@pytest.mark.parametrize("heal_by", ["flag", "entry"])
def test_a_chain_broken_beyond_recovery_heals_with_a_full_export(
    spark, clean_lakehouse, samples, tmp_path: Path, monkeypatch, capsys, heal_by: str
) -> None:
    """The last applied export ended more than 35 days ago: `sync --from-dynamodb` refuses,
    naming the command that heals; with `--heal` (or the table's `heal: true`, for a scheduled
    sync) it takes a full export (the request checked), reports the keys the outage changed,
    and the healed table verifies equal to that export, as does a `verify --from-dynamodb`
    export, whose counts go to CloudWatch."""
    synced(spark, samples["orders"])
    client, stub = stubbed()
    monkeypatch.setattr(sync, "dynamodb_client", lambda arn: client)
    where = ["--table-arn", ARN, "--to", "s3://exports-bucket/ddb", "--poll", "0"]
    with stub:
        assert cli.main(["sync", "--table", "orders", "--from-dynamodb", *where]) == 2
    err = capsys.readouterr().err
    assert "the chain of exports cannot continue" in err and "beyond point-in-time recovery" in err
    assert "ddb-lakehouse sync --table orders --from-dynamodb --heal" in err

    truth, lost = outage(export_items(samples["orders"]))
    now = clock.utc_now()
    healing = sample_exports.write_items_export(tmp_path / "heal", "orders", truth, now)
    checked = sample_exports.write_items_export(tmp_path / "check", "orders", truth, now, seed=1)
    heal_key = f"ddb/AWSDynamoDB/{healing.name}/manifest-summary.json"
    check_key = (
        f"ddb/{export_control.VERIFY_PREFIX}/AWSDynamoDB/{checked.name}/manifest-summary.json"
    )
    exported_locally(
        monkeypatch,
        {
            f"s3://exports-bucket/{heal_key.rsplit('/', 1)[0]}": healing,
            f"s3://exports-bucket/{check_key.rsplit('/', 1)[0]}": checked,
        },
    )
    request = export_request("ddb")
    # ... while a verify export of the table is in progress: the sync does not wait for it.
    completed(stub, request, heal_key, len(truth), verifying=f"ddb/{export_control.VERIFY_PREFIX}")
    heal = ["--heal"]
    if heal_by == "entry":
        project = copy_project(tmp_path, monkeypatch)
        text = (project / "dbt_project.yml").read_text()
        entry = "      sort_key: order_id:S\n"
        (project / "dbt_project.yml").write_text(text.replace(entry, entry + "      heal: true\n"))
        heal = []
    with stub:
        assert cli.main(["sync", "--table", "orders", "--from-dynamodb", *where, *heal]) == 0
        stub.assert_no_pending_responses()
    printed = capsys.readouterr().out
    assert "beyond point-in-time recovery; healing" in printed
    assert (
        f"healed with the full export {healing}: 1 key(s) inserted (first: {lost['missing']}), "
        f"1 key(s) deleted (first: {lost['extra']}), 1 key(s) updated (first: {lost['different']})"
    ) in printed
    code, report = verified(healing, capsys)
    assert code == 0 and report["counts"]["equal"] == len(truth)
    if heal_by == "entry":
        return

    # verify --from-dynamodb: its own prefix, and its counts published.
    metrics, metrics_stub = stubbed("cloudwatch")
    monkeypatch.setattr(inspection, "cloudwatch_client", lambda region: metrics)
    completed(stub, export_request(f"ddb/{export_control.VERIFY_PREFIX}"), check_key, len(truth))
    metrics_stub.add_response("put_metric_data", {}, all_equal_metrics(len(truth)))
    with stub, metrics_stub:
        code, report = verified(None, capsys, "--from-dynamodb", *where, "--metrics")
        stub.assert_no_pending_responses()
        metrics_stub.assert_no_pending_responses()
    assert code == 0 and report["export"] == str(checked)
