"""`maintain` on a single-table design: every entity table compacted and expired, the one change
log pruned and its ledger carried forward only for what every entity table merged, and the
entity tables exact throughout, also when rebuilt from the pruned change log. Real Spark,
Iceberg, dbt; DuckDB reads the entity tables (``single_table_reference``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from single_table_reference import add_app, assert_entity_tables, write_chain

from ingestion.catalog import ledger, merge_log, table_types
from ingestion.catalog import table as catalog_table
from ingestion.dynamodb.entities import final_tables
from ingestion.dynamodb.tables import get_table
from ingestion.maintenance import adopt, compaction
from ingestion.merge import runner
from ingestion.samples import stream as sample_stream
from ingestion.sources import manifest
from ingestion.sources.change_file_writer import write_batch
from ingestion.staging import exports, streams

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_maintain_keeps_every_entity_table_exact(
    spark, clean_lakehouse, project_copy: Path, lakehouse_home: Path, tmp_path: Path
) -> None:
    add_app("attribute")
    app = get_table("app")
    finals = [f.name for f in final_tables(app)]
    chain, state = write_chain(tmp_path, "attribute")
    for folder in chain:
        exports.ingest_export(spark, app, str(folder))
        adopt.adopt_before_merge(
            catalog_table.load([app], spark)[0]
        )  # the second incremental's drift, in orders only
        runner.run_merge(spark, [app], test=False)
    kept = table_types.stored_schema(spark, app)
    assert kept is not None and kept.entity("app__order").get("total").type.sql() == "decimal(38,3)"
    assert kept.entity("app__user").get("total").type.sql() == "bigint"
    # A stream batch over two keys the first incremental changed: their incremental rows are
    # then superseded (the full export's rows stay, as the newest full export's).
    records = []
    for number, k in enumerate([("USER#1", "USER#1"), ("USER#1", "ORDER#00002")], 1):
        new = {**state[k], "note": {"S": "streamed"}}
        keys = {"pk": {"S": k[0]}, "sk": {"S": k[1]}}
        records.append(
            sample_stream.stream_record("app", "MODIFY", keys, state[k], new, 3_000_000_000, number)
        )
        state[k] = new
    write_batch(records, str(tmp_path / "merged"))
    streams.ingest_stream(spark, app, str(tmp_path / "merged"), settle_seconds=0)
    runner.run_merge(spark, [app], test=False)
    assert_entity_tables(spark, lakehouse_home, state, "attribute")

    young = compaction.maintain(spark, app)
    for final in finals:  # the merges' delete files absorbed in each entity table
        assert compaction.live_files(spark, final)[1] == 0, final
    assert young.compaction.delete_files[0] > 0 and young.compaction.delete_files[1] == 0
    assert young.pruned == 0  # every change younger than the retention
    assert_entity_tables(spark, lakehouse_home, state, "attribute")

    # A batch staged and merged into no entity table yet is not pruned nor checkpointed away.
    key = {"pk": {"S": "USER#3"}, "sk": {"S": "USER#3"}}
    renamed = {**state[("USER#3", "USER#3")], "name": {"S": "pending"}}
    record = sample_stream.stream_record("app", "MODIFY", key, None, renamed, 4_000_000_000, 10**30)
    write_batch([record], str(tmp_path / "streams"))
    pending = streams.ingest_stream(spark, app, str(tmp_path / "streams"), settle_seconds=0)

    later = datetime.now(UTC).replace(tzinfo=None) + timedelta(days=2)
    old = compaction.maintain(spark, app, keep_snapshots=2, now=later)
    expired = {e.table: e.snapshots[1] for e in old.expired}
    assert expired == {
        "staging.app": 2,
        "staging.dynamodb_lakehouse_merges": 2,
        **{f"lakehouse.{final}": 2 for final in finals},
    }
    assert old.pruned == 2  # the two superseded incremental rows, merged everywhere
    assert spark.table("lake.staging.app").where(f"_batch_id = '{pending.batch_id}'").count() == 1
    sources = {manifest.read_export(c, verify=False).export_arn for c in chain}
    assert sources <= {e.source for e in ledger.entries(spark, "app")}
    assert_entity_tables(spark, lakehouse_home, state, "attribute")

    runner.run_merge(spark, [app], test=False)  # the pending batch, into each entity table
    state[("USER#3", "USER#3")] = renamed
    assert all(merge_log.new_batches(spark, final) == [] for final in finals)
    assert_entity_tables(spark, lakehouse_home, state, "attribute")
    runner.run_merge(spark, [app], full_refresh=True)  # rebuilt from the pruned change log
    assert_entity_tables(spark, lakehouse_home, state, "attribute")
