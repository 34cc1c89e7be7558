"""Incremental exports end to end: a full export and a chain of three incrementals (the last one
NEW_IMAGE) through ingest and the dbt merge, compared value by value with the table computed
independently in Python from the export files. Re-runs, order, delete-only batches, a kill -9
between staging and merge, and a full export that re-baselines the table.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from orders_reference import (
    ITEMS,
    assert_final_equals,
    expected_items,
    expected_state,
    final_rows,
    key_of,
)
from support import ROOT

from ingestion.catalog import ledger
from ingestion.cli import main
from ingestion.config import clock
from ingestion.dynamodb.tables import get_table
from ingestion.merge import dbt_process, merge_counts, runner
from ingestion.samples import sample_exports
from ingestion.sources import manifest
from ingestion.staging import exports
from ingestion.staging.chain import ChainError

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def sync(spark, folders: list[Path]) -> list[merge_counts.MergeCounts]:
    orders = get_table("orders")
    for folder in folders:
        exports.ingest_export(spark, orders, str(folder))
    counts, _ = runner.run_merge(spark, [orders])
    return counts


def test_chain_applies_value_by_value_and_reruns_change_nothing(
    spark, clean_lakehouse, chain
) -> None:
    counts = sync(spark, chain[:1])
    assert counts[0].inserted == ITEMS
    counts = sync(spark, chain[1:])
    old, new = expected_state(chain[:1]), expected_state(chain)
    changed = {k for k in old.keys() & new.keys() if old[k][0] != new[k][0]}
    assert (counts[0].inserted, counts[0].updated, counts[0].deleted) == (
        len(new.keys() - old.keys()),
        len(changed),
        len(old.keys() - new.keys()),
    )
    assert counts[0].deleted > 0 and counts[0].updated > 0 and counts[0].inserted > 0
    assert_final_equals(spark, chain)
    operations = {r["_operation"] for r in spark.table("lake.staging.orders").collect()}
    assert operations == {"snapshot", "insert", "update", "delete", "upsert"}

    before = merge_counts.current_snapshot(spark, "orders")
    again = [exports.ingest_export(spark, get_table("orders"), str(f)) for f in chain]
    assert all(r.skipped for r in again)  # every export twice: no-ops
    counts = sync(spark, [])
    assert (counts[0].inserted, counts[0].updated, counts[0].deleted) == (0, 0, 0)
    assert (
        merge_counts.current_snapshot(spark, "orders") == before
    )  # the second dbt run changed nothing
    assert_final_equals(spark, chain)


def test_out_of_order_export_is_refused_then_applied_in_order(
    spark, clean_lakehouse, chain
) -> None:
    sync(spark, chain[:2])
    before = final_rows(spark)
    with pytest.raises(ChainError) as failure:
        exports.ingest_export(spark, get_table("orders"), str(chain[3]))
    message = str(failure.value)
    third = manifest.read_export(chain[3], verify=False)
    second = manifest.read_export(chain[2], verify=False)
    assert "gap" in message
    assert third.export_from_time.isoformat() in message  # found
    assert (
        manifest.read_export(chain[1], verify=False).export_to_time.isoformat() in message
    )  # expected
    assert final_rows(spark) == before
    assert second.export_arn not in {e.source for e in ledger.entries(spark, "orders")}

    sync(spark, chain[2:])
    assert_final_equals(spark, chain)
    with pytest.raises(ChainError, match="overlaps"):
        # the same window again under another export id: refused
        copy = sample_exports.write_export(
            chain[0].parent.parent.parent,
            "orders",
            [iter(())],
            third.export_to_time + timedelta(days=1),
            random.Random(1),
            window=(second.export_from_time, second.export_to_time, "NEW_AND_OLD_IMAGES"),
        )
        exports.ingest_export(spark, get_table("orders"), str(copy))


def test_export_of_another_table_and_gaps_are_refused_unless_allowed(
    spark, clean_lakehouse, chain, tmp_path: Path, capsys
) -> None:
    orders = get_table("orders")
    with pytest.raises(ChainError, match="no full export yet"):
        exports.ingest_export(spark, orders, str(chain[1]))
    books = sample_exports.write_samples(tmp_path, 5, 1, ["books"])["books"]
    exports.ingest_export(spark, orders, str(chain[0]))
    assert main(["status", "--table", "orders"]) == 0
    status = capsys.readouterr().out
    assert "orders: 1 source(s) in the ledger" in status
    assert f"staged rows not merged yet: {ITEMS} (1 batch(es)); final rows: 0" in status
    with pytest.raises(ChainError, match="table/books"):
        exports.ingest_export(spark, orders, str(books))
    result = exports.ingest_export(spark, orders, str(chain[2]), allow_gap=True)
    assert result.rows > 0


def _delete_only_export(out: Path, exports: list[Path], keys: list[tuple[str, str]]) -> Path:
    last = manifest.read_export(exports[-1], verify=False)
    start, end = last.export_to_time, last.export_to_time + timedelta(hours=1)
    lines = [
        {
            "Metadata": {
                "WriteTimestampMicros": {
                    "N": str(int((start + timedelta(seconds=i + 1)).timestamp() * 1e6))
                }
            },
            "Keys": {"customer_id": {"S": c}, "order_id": {"S": o}},
        }
        for i, (c, o) in enumerate(keys)
    ]
    return sample_exports.write_export(
        out,
        "orders",
        [iter(lines)],
        end + timedelta(minutes=5),
        random.Random(9),
        window=(start, end, "NEW_IMAGE"),
    )


def test_delete_only_export_then_rerun(spark, clean_lakehouse, chain, tmp_path: Path) -> None:
    sync(spark, chain)
    victims = sorted(final_rows(spark))[:3]
    deletes = _delete_only_export(tmp_path, chain, victims)
    counts = sync(spark, [deletes])
    assert (counts[0].inserted, counts[0].updated, counts[0].deleted) == (0, 0, 3)
    counts = sync(spark, [deletes])  # re-run: nothing, no error
    assert (counts[0].inserted, counts[0].updated, counts[0].deleted) == (0, 0, 0)
    assert_final_equals(spark, [*chain, deletes])
    # The data tests catch a deleted key present in the final table.
    spark.sql(
        "insert into lake.lakehouse.orders select *, null from lake.staging.orders "
        f"where customer_id = '{victims[0][0]}' and order_id = '{victims[0][1]}' and _operation != "
        f"'delete' limit 1"
    )
    with pytest.raises(dbt_process.DbtError, match="dbt test"):
        dbt_process.dbt_invoke(["test", "--select", "orders"])


def test_kill_after_staging_commit_then_sync_again(spark, clean_lakehouse, chain) -> None:
    env = {**os.environ, "LAKEHOUSE_FAULT": "after-staging-commit"}
    command = [
        sys.executable,
        "-m",
        "ingestion.cli",
        "sync",
        "--table",
        "orders",
        *map(str, chain[:2]),
    ]
    killed = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert killed.returncode == -9, killed.stderr[-2000:]
    spark.sql("refresh table lake.staging.orders")
    staged = {e.source for e in ledger.entries(spark, "orders")}
    assert staged == {
        manifest.read_export(chain[0], verify=False).export_arn
    }  # committed, not merged
    assert not spark.catalog.tableExists("lake.lakehouse.orders")

    # The same command again, in this process: the kill needs a process of its own, its cure
    # does not (it reads the catalog as any later process would).
    assert main(["sync", "--table", "orders", *map(str, chain)]) == 0
    spark.sql("refresh table lake.staging.orders")
    spark.sql("refresh table lake.lakehouse.orders")
    assert_final_equals(spark, chain)


def test_newer_full_export_rebaselines(spark, clean_lakehouse, chain, tmp_path: Path) -> None:
    sync(spark, chain)
    now = expected_items(chain)
    kept = dict(sorted(now.items())[5:])  # five orders vanished without a change line
    last = manifest.read_export(chain[-1], verify=False)
    full = sample_exports.write_export(
        tmp_path,
        "orders",
        [iter({"Item": item} for item in kept.values())],
        last.export_to_time + timedelta(minutes=1),
        random.Random(3),
    )
    counts = sync(spark, [full])
    assert counts[0].deleted == 5
    assert set(final_rows(spark)) == set(kept)


def test_sync_stages_the_exports_it_is_given_in_time_order(
    spark, clean_lakehouse, chain, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sync full inc2 inc1 inc3` staged inc2 first and then refused inc1 (as a gap, or with
    --allow-gap as an overlap) forever. The exports are ordered by their times first."""
    given = [chain[0], chain[2], chain[1], chain[3]]
    capsys.readouterr()
    assert main(["sync", "--table", "orders", *map(str, given)]) == 0
    assert "exports given out of order: staged in time order" in capsys.readouterr().out
    staged = [e.source for e in ledger.entries(spark, "orders")]
    assert staged == [manifest.read_export(c, verify=False).export_arn for c in chain]
    assert_final_equals(spark, chain)


def _full_items(folder: Path) -> list[dict]:
    export = manifest.read_export(folder, verify=False)
    return [
        json.loads(text)["Item"]
        for data_file in export.files
        for text in gzip.decompress(data_file.path.read_bytes()).decode().splitlines()
    ]


def test_the_first_incremental_may_overlap_the_full_export(
    spark, clean_lakehouse, chain, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Real windows fall on whole minutes; a full export's time has milliseconds. The first
    incremental starting just before it (the loss-free choice) was refused as an overlap."""
    full = manifest.read_export(chain[0], verify=False)
    start = full.export_time.replace(second=0, microsecond=0)
    assert start < full.export_time
    before, changed = _full_items(chain[0])[:2]
    newer = {**changed, "status": {"S": "changed after the export"}}

    def line(old: dict, new: dict, written) -> dict:
        micros = clock.epoch_micros(written)
        keys = {k: new[k] for k in ("customer_id", "order_id")}
        return {
            "Metadata": {"WriteTimestampMicros": {"N": str(micros)}},
            "Keys": keys,
            "OldImage": old,
            "NewImage": new,
        }

    inc = sample_exports.write_incremental_export(
        tmp_path,
        "orders",
        [
            line(before, before, full.export_time - timedelta(milliseconds=100)),  # in the overlap
            line(changed, newer, full.export_time + timedelta(minutes=5)),
        ],
        (start, start + timedelta(hours=1)),
    )
    capsys.readouterr()
    assert main(["sync", "--table", "orders", str(chain[0]), str(inc)]) == 0
    out = capsys.readouterr().out
    assert "overlaps the full export" in out and "change nothing" in out
    assert_final_equals(spark, [chain[0], inc])
    assert final_rows(spark)[key_of(newer)]["status"] == "changed after the export"


def test_an_export_fills_a_gap_left_with_allow_gap(
    spark, clean_lakehouse, chain, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sync full inc2 --allow-gap` leaves the gap inc1 covers; inc1 given later was refused as
    an overlap forever. It fills the gap; status lists the gap while it is open."""
    assert main(["sync", "--table", "orders", "--allow-gap", str(chain[0]), str(chain[2])]) == 0
    first = manifest.read_export(chain[1], verify=False)
    assert "leaves a gap" in capsys.readouterr().out
    assert main(["status", "--table", "orders"]) == 0
    gap = f"open gap: {first.export_from_time.isoformat()} -> {first.export_to_time.isoformat()}"
    assert gap in capsys.readouterr().out
    assert main(["sync", "--table", "orders", str(chain[1]), str(chain[3])]) == 0
    assert "fills the gap" in capsys.readouterr().out
    assert main(["status", "--table", "orders"]) == 0
    assert "open gap" not in capsys.readouterr().out
    assert_final_equals(spark, chain)
