"""The dbt merge with real dbt runs (session method) over real Iceberg tables."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from pyspark.sql import functions as F
from support import ROOT

from ingestion.catalog import ledger
from ingestion.config import settings
from ingestion.dynamodb.tables import get_table
from ingestion.merge import dbt_process, merge_counts, runner
from ingestion.staging.exports import ingest_export

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def stage_changes(spark, table: str, key_column: str, changes: list[dict]) -> None:
    """Append hand-made change rows to a staging table, built from existing staged rows.

    Each change: ``like`` (key of the row to copy), ``key`` (the new key, default ``like``),
    ``operation``, ``version_delta`` (added to the copied row's version: its oldest staged row)
    and column overrides.
    """
    base = spark.table(f"lake.staging.{table}")
    now = datetime.now(UTC).replace(tzinfo=None)
    batch = f"test-batch-{uuid.uuid4().hex[:8]}"
    frames = []
    for change in changes:
        row = base.where(F.col(key_column) == change["like"]).orderBy("_version").limit(1)
        row = (
            row.withColumn(key_column, F.lit(change.get("key", change["like"])))
            .withColumn("_operation", F.lit(change["operation"]))
            .withColumn("_version", F.col("_version") + F.lit(change["version_delta"]))
            .withColumn("_batch_id", F.lit(batch))
            .withColumn("_ingested_at", F.lit(now).cast("timestamp"))
        )
        for column, value in change.get("set", {}).items():
            row = row.withColumn(column, F.lit(value))
        frames.append(row)
    changes_df = frames[0]
    for frame in frames[1:]:
        changes_df = changes_df.unionByName(frame)
    # One commit with its ledger entry, as ingestion writes it: merges pick batches by commit.
    (
        changes_df.writeTo(f"lake.staging.{table}")
        .option(f"snapshot-property.{ledger.SOURCE}", f"test-source-{batch}")
        .option(f"snapshot-property.{ledger.BATCH}", batch)
        .append()
    )


def latest_summary(spark, table: str) -> dict[str, str]:
    row = (
        spark.table(f"lake.lakehouse.{table}.snapshots")
        .orderBy(F.col("committed_at").desc())
        .first()
    )
    return dict(row["summary"])


def pyiceberg_rows(spark, table: str) -> int:
    """Row count read without Spark, from the table's current metadata file."""
    from pyiceberg.table import StaticTable

    location = (
        spark.table(f"lake.lakehouse.{table}.metadata_log_entries")
        .orderBy(F.col("timestamp").desc())
        .first()["file"]
    )
    return StaticTable.from_metadata(location).scan().to_arrow().num_rows


def test_merge_applies_upserts_deletes_and_the_version_guard(spark, clean_lakehouse, samples):
    books = get_table("books")
    ingest_export(spark, books, str(samples["books"]))
    counts, _ = runner.run_merge(spark, [books])
    assert (counts[0].rows, counts[0].inserted) == (60, 60)
    # The first build of one full export copies its rows: no per-key aggregation, no baseline.
    built = settings.project_dir() / "target/compiled/dynamodb_lakehouse/models/marts/books.sql"
    assert "max_by" not in built.read_text() and "snapshot" not in built.read_text()
    first_snapshot = merge_counts.current_snapshot(spark, "books")
    assert spark.table("lake.lakehouse.books").count() == 60
    assert pyiceberg_rows(spark, "books") == 60
    properties = {
        r["key"]: r["value"] for r in spark.sql("show tblproperties lake.lakehouse.books").collect()
    }
    assert properties["format-version"] == "2"
    assert properties["write.merge.mode"] == "merge-on-read"
    # No view anywhere: Glue's Iceberg catalog cannot store one (the staging models are
    # ephemeral), so a view would fail the first `dbt run` on EMR.
    for namespace in ("staging", "lakehouse"):
        shown = spark.sql(f"show views in lake.{namespace}").collect()
        assert [v for v in shown if not v["isTemporary"]] == [], namespace  # not a temp view
    # Commit retries are a table property in Iceberg (a catalog setting was ignored).
    for table in ("lakehouse.books", "staging.books", "staging.dynamodb_lakehouse_merges"):
        shown = spark.sql(f"show tblproperties lake.{table}").collect()
        assert {r["key"]: r["value"] for r in shown}["commit.retry.num-retries"] == "10", table

    ids = sorted(r["id"] for r in spark.table("lake.lakehouse.books").select("id").collect())
    updated, deleted, stale, new = ids[0], ids[1], ids[2], "book-new-0001"
    stale_title = spark.table("lake.lakehouse.books").where(F.col("id") == stale).first()["title"]
    stage_changes(
        spark,
        "books",
        "id",
        [
            {
                "like": updated,
                "operation": "update",
                "version_delta": 1,
                "set": {"title": "Changed"},
            },
            {"like": deleted, "operation": "delete", "version_delta": 1},
            {
                "like": updated,
                "key": new,
                "operation": "insert",
                "version_delta": 1,
                "set": {"title": "Brand new"},
            },
            {"like": stale, "operation": "update", "version_delta": -1, "set": {"title": "Stale"}},
        ],
    )
    counts, _ = runner.run_merge(spark, [books])
    assert "max_by" in built.read_text()  # an incremental merge: the latest change per key

    final = {r["id"]: r for r in spark.table("lake.lakehouse.books").collect()}
    assert final[updated]["title"] == "Changed"
    assert final[updated]["_operation"] == "update"
    assert deleted not in final
    assert final[new]["title"] == "Brand new"
    assert final[stale]["title"] == stale_title  # older than the row: ignored
    assert len(final) == 60
    assert (counts[0].inserted, counts[0].updated, counts[0].deleted) == (1, 1, 1)
    # Merged, not re-created: the commit wrote only the two new row versions plus position
    # deletes, and the first snapshot is still in the table's history.
    summary = latest_summary(spark, "books")
    assert summary["added-records"] == "2"
    assert summary.get("added-position-deletes") == "2"
    history = {r["snapshot_id"] for r in spark.table("lake.lakehouse.books.snapshots").collect()}
    assert first_snapshot in history
    assert pyiceberg_rows(spark, "books") == 60  # an independent reader sees the deletes

    # `_inserted_batch_id` (decision 0014): created by the first build, null for its rows (an
    # update keeps it), the batch of the insert for a row an incremental merge inserted.
    assert final[new]["_inserted_batch_id"] == final[new]["_batch_id"]
    assert final[updated]["_inserted_batch_id"] is None
    assert _counts_both_ways(spark, books, counts[0].batches) == (1, 1, 1)

    # Again: the row that merge inserted updated (it keeps its insert's batch), one inserted,
    # one deleted, and a delete of a key no longer there (no row to count).
    stage_changes(
        spark,
        "books",
        "id",
        [
            {
                "like": updated,
                "key": new,
                "operation": "update",
                "version_delta": 2,
                "set": {"title": "Newer"},
            },
            {"like": updated, "key": "book-new-0002", "operation": "insert", "version_delta": 2},
            {"like": ids[3], "operation": "delete", "version_delta": 1},
            {"like": updated, "key": deleted, "operation": "delete", "version_delta": 2},
        ],
    )
    first_insert = final[new]["_batch_id"]
    counts, _ = runner.run_merge(spark, [books])
    assert (counts[0].inserted, counts[0].updated, counts[0].deleted) == (1, 1, 1)
    assert _counts_both_ways(spark, books, counts[0].batches) == (1, 1, 1)
    final = {r["id"]: r for r in spark.table("lake.lakehouse.books").collect()}
    assert final[new]["title"] == "Newer" and final[new]["_inserted_batch_id"] == first_insert
    assert final[new]["_batch_id"] != first_insert

    counts, _ = runner.run_merge(spark, [books], test=False)  # nothing new: nothing changes
    assert (counts[0].inserted, counts[0].updated, counts[0].deleted) == (0, 0, 0)
    assert spark.table("lake.lakehouse.books").count() == 60


def _counts_both_ways(spark, table, batches) -> tuple[int, int, int]:
    """The last merge's inserted, updated and deleted rows from its commit (the rows it wrote,
    its summary: merge_counts.from_commit), checked equal to those from the touched keys looked
    up in both snapshots; and a row of its batches it did not write (an earlier attempt's)
    sends from_commit back to the snapshots."""
    from ingestion.catalog import table as catalog_table
    from ingestion.merge.touched_keys import TouchedKeys

    (table,) = catalog_table.load([table], spark)
    after = merge_counts.current_snapshot(spark, table.name)
    (parent,) = spark.sql(
        f"select parent_id from lake.lakehouse.{table.name}.snapshots where snapshot_id = {after}"
    ).first()
    found = merge_counts.from_commit(spark, table, parent, after, batches)
    assert found is not None
    touched = TouchedKeys(spark)
    try:
        with pytest.MonkeyPatch.context() as patched:
            patched.setattr(merge_counts, "from_commit", lambda *args, **kwargs: None)
            looked_up = merge_counts.commit_counts(spark, table, parent, after, batches, touched)
    finally:
        touched.release()
    assert (looked_up.inserted, looked_up.updated, looked_up.deleted) == found
    # A live row of its batches that a commit did not write (an earlier attempt's: here one
    # written again in a commit after it) sends from_commit back to the snapshots. Rolled back
    # after: the next merge builds on the current snapshot, not the last one committed.
    name = f"lake.lakehouse.{table.name}"
    quoted = ", ".join(f"'{b}'" for b in batches)
    spark.sql(f"insert into {name} select * from {name} where _batch_id in ({quoted}) limit 1")
    again = merge_counts.current_snapshot(spark, table.name)
    try:
        assert again is not None and again != after
        assert merge_counts.from_commit(spark, table, after, again, batches) is None
    finally:
        spark.sql(f"call lake.system.rollback_to_snapshot('{name[5:]}', {after})")
    return found


def test_a_delete_merged_earlier_keeps_late_older_changes_out(spark, clean_lakehouse, samples):
    """A merge reads the new batches and, of the history, only the delete markers of their keys:
    a late update or insert older than a delete that an earlier merge applied stays out, in the
    incremental merge as in a full build; a change newer than the delete brings the item back."""
    books = get_table("books")
    ingest_export(spark, books, str(samples["books"]))
    runner.run_merge(spark, [books], test=False)
    ids = sorted(r["id"] for r in spark.table("lake.lakehouse.books").select("id").collect())
    gone, back = ids[0], ids[1]
    stage_changes(
        spark,
        "books",
        "id",
        [
            {"like": gone, "operation": "delete", "version_delta": 10},
            {"like": back, "operation": "delete", "version_delta": 10},
        ],
    )
    counts, _ = runner.run_merge(spark, [books], test=False)
    assert counts[0].deleted == 2
    stage_changes(
        spark,
        "books",
        "id",
        [
            {"like": gone, "operation": "update", "version_delta": 5, "set": {"title": "Late"}},
            {"like": back, "operation": "insert", "version_delta": 20, "set": {"title": "Back"}},
        ],
    )
    stage_changes(
        spark,
        "books",
        "id",
        [{"like": gone, "operation": "insert", "version_delta": 1, "set": {"title": "Later"}}],
    )
    counts, _ = runner.run_merge(spark, [books])  # dbt test included
    final = {r["id"]: r for r in spark.table("lake.lakehouse.books").collect()}
    assert gone not in final
    assert final[back]["title"] == "Back"
    assert (counts[0].inserted, counts[0].updated, counts[0].deleted) == (1, 0, 0)
    runner.run_merge(spark, [books], full_refresh=True, test=False)
    rebuilt = {r["id"]: r["title"] for r in spark.table("lake.lakehouse.books").collect()}
    assert rebuilt == {k: v["title"] for k, v in final.items()}


def test_composite_keys_and_dbt_test_guarding_quality(spark, clean_lakehouse, samples):
    orders = get_table("orders")
    ingest_export(spark, orders, str(samples["orders"]))
    runner.run_merge(spark, [orders])
    assert spark.table("lake.lakehouse.orders").count() == 60

    first = spark.table("lake.lakehouse.orders").orderBy("customer_id", "order_id").first()
    # Same customer, other order: deleting one order must not touch the customer's others.
    siblings = (
        spark.table("lake.lakehouse.orders")
        .where(F.col("customer_id") == first["customer_id"])
        .count()
    )
    base = spark.table("lake.staging.orders").where(
        (F.col("customer_id") == first["customer_id"]) & (F.col("order_id") == first["order_id"])
    )
    (
        base.withColumn("_operation", F.lit("delete"))
        .withColumn("_version", F.col("_version") + 1)
        .withColumn("_batch_id", F.lit("delete-batch"))
        .withColumn("_ingested_at", F.current_timestamp())
        .writeTo("lake.staging.orders")
        .option(f"snapshot-property.{ledger.SOURCE}", "test-delete")
        .option(f"snapshot-property.{ledger.BATCH}", "delete-batch")
        .append()
    )
    runner.run_merge(spark, [orders])
    remaining = spark.table("lake.lakehouse.orders")
    assert remaining.count() == 59
    assert remaining.where(F.col("customer_id") == first["customer_id"]).count() == siblings - 1

    # `buckets: 16`: the table is partitioned by bucket(16, customer_id), and the merge of one
    # customer's change filtered its target scan to that customer's bucket, and wrote only there.
    layout = {
        r["col_name"]: r["data_type"] for r in spark.sql("describe lake.lakehouse.orders").collect()
    }
    assert layout.get("Part 0") == "bucket(16, customer_id)"
    bucket = spark.sql(
        "select lake.system.bucket(16, customer_id) from lake.lakehouse.orders "
        f"where customer_id = '{first['customer_id']}'"
    ).first()[0]
    compiled = (ROOT / "target/run/dynamodb_lakehouse/models/marts/orders.sql").read_text()
    assert f"lake.system.bucket(16, target.`customer_id`) in ({bucket})" in compiled
    assert latest_summary(spark, "orders")["changed-partition-count"] == "1"
    # The strategy cached the changes for the bucket list and the MERGE; nothing stays cached.
    logs = [ROOT / "logs/dbt.log.1", ROOT / "logs/dbt.log"]  # dbt rotates its log at 10 MB
    assert any("cache table orders__dbt_tmp" in p.read_text() for p in logs if p.exists())
    assert spark._jsparkSession.sharedState().cacheManager().isEmpty()

    # A duplicate key in the final table makes `dbt test` fail loudly.
    spark.sql("insert into lake.lakehouse.orders select * from lake.lakehouse.orders limit 1")
    with pytest.raises(dbt_process.DbtError, match="dbt test"):
        dbt_process.dbt_invoke(["test", "--select", "orders"])


def test_the_merge_log_is_read_again_only_after_a_commit_to_it(spark, clean_lakehouse) -> None:
    """``merged_batches`` keeps its last read while the merge log's metadata file is the same (a
    tick asks three times); any commit (a merge recorded, batches forgotten) makes it read the
    rows again."""
    from ingestion.catalog import merge_log

    merge_log.ensure_merge_log(spark)
    context = spark.sparkContext

    def jobs_of(call):
        group = f"probe-{uuid.uuid4().hex}"
        context.setJobGroup(group, "merge log probe")
        try:
            found = call()
        finally:
            context.setLocalProperty("spark.jobGroup.id", None)
        return found, len(context.statusTracker().getJobIdsForGroup(group))

    assert jobs_of(lambda: merge_log.merged_batches(spark, "probe"))[0] == set()
    merge_log.record_merged(spark, {"probe": ["b-1", "b-2"], "other": ["b-9"]})
    merged, jobs = jobs_of(lambda: merge_log.merged_batches(spark, "probe"))
    assert merged == {"b-1", "b-2"} and jobs >= 1
    again, jobs = jobs_of(lambda: merge_log.merged_batches(spark, "probe"))
    assert again == {"b-1", "b-2"} and jobs == 0  # the same metadata file: no Spark job
    again.add("mutated")  # a caller's set is its own
    assert merge_log.merged_batches(spark, "probe") == {"b-1", "b-2"}
    merge_log.forget(spark, "probe", ["b-1"])
    assert merge_log.merged_batches(spark, "probe") == {"b-2"}
    assert merge_log.new_batches(spark, "probe") == []  # no staging table: no ledger


def test_a_merge_sees_what_another_process_staged_since_this_session_read_the_table(
    spark, clean_lakehouse, chain
) -> None:
    """`make demo` stages with spark-submit and merges in its own session: its second merge read
    the staging table as the session had cached it after the first, found nothing new and left
    the incrementals unmerged."""
    import os
    import subprocess
    import sys

    orders = get_table("orders")
    ingest_export(spark, orders, str(chain[0]))
    runner.run_merge(spark, [orders], test=False)  # the session now holds staging.orders
    done = subprocess.run(
        [sys.executable, "-m", "ingestion.cli", "ingest", "--table", "orders", str(chain[1])],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (counts,) = runner.run_merge(spark, [orders], test=False)[0]
    assert len(counts.batches) == 1 and counts.inserted + counts.updated + counts.deleted > 0
