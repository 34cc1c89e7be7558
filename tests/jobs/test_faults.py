"""Fault injection: `kill -9` at each point of an export's way to the final table, then the same
command again; and two ingest processes for one export at once. The final table must equal the
items the exports leave (computed in plain Python), with no change lost or staged twice.

Real processes (`python -m ingestion.cli sync ...`), real Spark, Iceberg and dbt; the kill is a
SIGKILL the process sends itself at the named point (ingestion/fault_points.py). Marked `faults`:
run with `make test-faults` (not part of `make test`), with the stream kills of test_streams.py
(after the stream commit, during cleanup, `watch` killed with a reader loop). The kill after a
staging commit stays in the main suite (test_incremental.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal

import pytest
from orders_reference import ITEMS, assert_final_equals
from single_table_reference import add_app, assert_entity_tables, write_chain
from support import ROOT

from ingestion.catalog import ledger, merge_log
from ingestion.config import names
from ingestion.dynamodb.tables import get_table
from ingestion.merge import runner
from ingestion.sources import manifest
from ingestion.staging import exports

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.faults]


def cli(*args: str, fault: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LAKEHOUSE_FAULT"}
    if fault:
        env["LAKEHOUSE_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-m", "ingestion.cli", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )


def refresh(spark) -> None:
    """What the other process committed, seen by this session: Iceberg's catalog caches a table
    it loaded for 30 s, so a re-run faster than that left the merge log as this session last
    read it (the batches looked unmerged; seen once after `during-merge`)."""
    for name in ("lake.staging.orders", "lake.lakehouse.orders", names.merge_log_table()):
        if spark.catalog.tableExists(name):
            spark.sql(f"refresh table {name}")


@pytest.mark.parametrize("fault", ["before-staging-commit", "during-merge", "after-merge-commit"])
def test_kill_9_then_the_same_command_again(  # noqa: F811
    spark, clean_lakehouse, chain, fault: str
) -> None:
    orders = get_table("orders")
    exports.ingest_export(spark, orders, str(chain[0]))  # a final table exists: merges are MERGEs
    runner.run_merge(spark, [orders], test=False)
    command = ["sync", "--table", "orders", *map(str, chain[1:])]

    killed = cli(*command, fault=fault)
    assert killed.returncode == -9, killed.stdout[-2000:] + killed.stderr[-2000:]
    refresh(spark)
    staged = {e.source for e in ledger.entries(spark, "orders")}
    sources = [manifest.read_export(c, verify=False).export_arn for c in chain]
    if fault == "before-staging-commit":
        assert staged == {sources[0]}  # the first increment's commit never happened
    else:
        assert staged == set(sources)  # all staged; the merge died or was not logged
    assert len(merge_log.new_batches(spark, "orders")) == (
        0 if fault == "before-staging-commit" else len(chain) - 1
    )

    done = cli(*command)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    refresh(spark)
    assert merge_log.new_batches(spark, "orders") == []
    # Each export staged once: the staging rows are exactly the exports' lines.
    lines = sum(f.item_count for c in chain for f in manifest.read_export(c, verify=False).files)
    assert spark.table("lake.staging.orders").count() == lines
    assert_final_equals(spark, chain)


def test_two_ingests_of_one_export_at_once_stage_it_once(  # noqa: F811
    spark, clean_lakehouse, chain
) -> None:
    command = [sys.executable, "-m", "ingestion.cli", "ingest", "--table", "orders", str(chain[0])]
    env = {k: v for k, v in os.environ.items() if k != "LAKEHOUSE_FAULT"}
    runs = [
        subprocess.Popen(
            command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=900) for run in runs]
    codes = [run.returncode for run in runs]
    texts = [out + err for out, err in outputs]
    assert 0 in codes, texts
    for code, text in zip(codes, texts, strict=True):
        # The other run either found it staged, or lost the race and removed its copy.
        assert code == 0 or (code == 2 and "staged by another process at the same time" in text), (
            text[-2000:]
        )
    refresh(spark)
    assert spark.table("lake.staging.orders").count() == ITEMS  # never staged twice
    source = manifest.read_export(chain[0], verify=False).export_arn
    assert [e.source for e in ledger.entries(spark, "orders")] == [source]
    runner.run_merge(spark, [get_table("orders")])
    assert_final_equals(spark, chain[:1])


@pytest.mark.parametrize("fault", ["before-rebuild-commit", "after-rebuild-commit"])
def test_kill_9_during_drift_adoption_then_the_same_command_again(
    spark, clean_lakehouse, project_copy, tmp_path, fault: str
) -> None:
    """A stream change that does not fit its column (``qty`` 1 -> 1.5): ``sync --stream`` stages
    it and adopts the wider type (a rebuild of staging), killed before or after the rebuild's
    replace. The same command again merges the exact value: never ``1`` cast into a ``bigint``
    column, never a null."""
    from ingestion.project import onboarding
    from ingestion.samples import sample_exports
    from ingestion.samples import stream as sample_stream
    from ingestion.samples.items import BASE_TIME
    from ingestion.sources.change_file_writer import write_batch

    onboarding.add_table("t", "id:S", None)
    a = {"id": {"S": "a"}, "qty": {"N": "1"}}
    b = {"id": {"S": "b"}, "qty": {"N": "2"}}
    full = sample_exports.write_items_export(tmp_path / "full", "t", [a, b])
    assert cli("sync", "--table", "t", str(full)).returncode == 0
    location = tmp_path / "streams"
    changed = {**a, "qty": {"N": "1.5"}}
    later = int(BASE_TIME.timestamp()) + 3600
    record = sample_stream.stream_record("t", "MODIFY", {"id": a["id"]}, a, changed, later, 1)
    assert write_batch([record], str(location))[1] is None
    command = ["sync", "--table", "t", "--stream", str(location), "--settle", "0"]

    killed = cli(*command, fault=fault)
    assert killed.returncode == -9, killed.stdout[-2000:] + killed.stderr[-2000:]
    done = cli(*command)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name in ("lake.staging.t", "lake.lakehouse.t"):
        spark.sql(f"refresh table {name}")
    rows = {r["id"]: r["qty"] for r in spark.table("lake.lakehouse.t").collect()}
    assert {k: str(v) for k, v in rows.items()} == {"a": "1.5", "b": "2.0"}
    types = {f.name: f.dataType.simpleString() for f in spark.table("lake.lakehouse.t").schema}
    assert types["qty"] == "decimal(38,1)"
    for name in ("lake.staging.t", "lake.lakehouse.t"):
        spark.sql(f"drop table if exists {name}")


def test_kill_9_before_a_first_loads_commit_then_the_same_command_again(
    spark, clean_lakehouse, project_copy, tmp_path
) -> None:
    """A first load stages with its first items' types (``Schema.sampled``), proven by the
    staging pass, which creates the staging table with its commit; killed before that commit,
    it leaves no table. The same command again stages with the types of every item (here an
    item after the first 1,000 holds a fraction): never a value cast into the first items'
    ``bigint``, never a null."""
    from ingestion.catalog import table_types
    from ingestion.project import onboarding
    from ingestion.samples import sample_exports
    from ingestion.schema import detect

    onboarding.add_table("t", "id:S", None)
    items = [
        {"id": {"S": f"k{i:05d}"}, "qty": {"N": str(i)}} for i in range(detect.SAMPLE_ITEMS + 200)
    ]
    items.append({"id": {"S": "late"}, "qty": {"N": "2.5"}})
    full = sample_exports.write_items_export(tmp_path / "full", "t", items)
    command = ["sync", "--table", "t", str(full)]

    killed = cli(*command, fault="before-staging-commit")
    assert killed.returncode == -9, killed.stdout[-2000:] + killed.stderr[-2000:]
    assert not spark.catalog.tableExists("lake.staging.t")  # created by its commit only
    done = cli(*command)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "types did not hold for every item" in done.stdout
    for name in ("lake.staging.t", "lake.lakehouse.t"):
        spark.sql(f"refresh table {name}")
    rows = {r["id"]: r["qty"] for r in spark.table("lake.lakehouse.t").collect()}
    assert {k: str(v) for k, v in rows.items()} == {
        i["id"]["S"]: str(Decimal(i["qty"]["N"]).quantize(Decimal("0.1"))) for i in items
    }
    export = manifest.read_export(str(full), verify=False)
    whole = detect.detect_export(spark, export, get_table("t"))
    assert table_types.stored_schema(spark, get_table("t")).get("qty").type == whole.get("qty").type
    for name in ("lake.staging.t", "lake.lakehouse.t"):
        spark.sql(f"drop table if exists {name}")


SPLIT_FAULTS = [
    "first-load",
    "before-staging-commit",
    "during-merge",
    "after-merge-commit",
    "before-rebuild-commit",  # the second incremental's drift, adopted by a rebuild
    "after-rebuild-commit",
]


@pytest.mark.parametrize("fault", SPLIT_FAULTS)
def test_kill_9_on_a_single_table_design_then_the_same_command_again(
    spark, clean_lakehouse, project_copy, lakehouse_home, tmp_path, fault: str
) -> None:
    """Entity tables (attribute rule: an item changes entity, deletes carry only Keys, an
    order's drift adopted): a kill mid-batch stages no entity's changes at all, and the same
    command again leaves every entity table exact."""
    add_app("attribute")
    chain, state = write_chain(tmp_path, "attribute")
    if fault == "first-load":  # killed before the commit that creates the change log
        killed = cli("sync", "--table", "app", str(chain[0]), fault="before-staging-commit")
        assert killed.returncode == -9, killed.stdout[-2000:] + killed.stderr[-2000:]
        assert not spark.catalog.tableExists("lake.staging.app")  # no entity, no types
    first = cli("sync", "--table", "app", str(chain[0]))
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    command = ["sync", "--table", "app", *map(str, chain[1:])]
    if fault != "first-load":
        killed = cli(*command, fault=fault)
        assert killed.returncode == -9, killed.stdout[-2000:] + killed.stderr[-2000:]
        for name in ("lake.staging.app", names.merge_log_table()):
            spark.sql(f"refresh table {name}")
        sources = [manifest.read_export(c, verify=False).export_arn for c in chain]
        staged = spark.table("lake.staging.app").groupBy("_source").count().collect()
        by_source = {r["_source"]: r["count"] for r in staged}
        if fault == "before-staging-commit":  # no entity half-staged: not one row of the batch
            assert set(by_source) == {sources[0]}
            assert {e.source for e in ledger.entries(spark, "app")} == {sources[0]}
        else:
            assert set(by_source) == set(sources)

    done = cli(*command)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name in ("lake.staging.app", names.merge_log_table()):
        spark.sql(f"refresh table {name}")
    for final in ("app__user", "app__order", "app__address", "app__unmatched"):
        assert merge_log.new_batches(spark, final) == []
    lines = sum(f.item_count for c in chain for f in manifest.read_export(c, verify=False).files)
    assert spark.table("lake.staging.app").count() == lines  # each export staged once
    assert_entity_tables(spark, lakehouse_home, state, "attribute")
