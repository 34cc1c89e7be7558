"""The data test of a final table (macros/tests/dynamodb_final_table.sql): every check in one
query, which looks at the keys a merge's batches touched; `merge --full-check` and `maintain` test
whole tables. It fails on every damage the six tests it replaced caught, and names what it found.
Its null checks read no data file when Iceberg's null counts prove there is no null."""

from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path

import pytest

from ingestion import cli
from ingestion.catalog import merge_log
from ingestion.catalog import table as catalog_table
from ingestion.config import settings
from ingestion.dynamodb.tables import get_table
from ingestion.merge import dbt_process
from ingestion.merge.touched_keys import TouchedKeys
from ingestion.samples import orders_chain, sample_exports

pytestmark = [pytest.mark.slow, pytest.mark.integration]

KEYS = ("customer_id", "order_id")
TEST = "dynamodb_final_table_orders_orders"


def _keys(frame) -> set[tuple[str, str]]:
    return {(r[0], r[1]) for r in frame.select(*KEYS).collect()}


def _where(key: tuple[str, str]) -> str:
    return f"customer_id = '{key[0]}' and order_id = '{key[1]}'"


def _delete(spark, key: tuple[str, str]) -> None:
    spark.sql(f"delete from lake.lakehouse.orders where {_where(key)}")


def _test(batches: list[str], floor: bool = False) -> None:
    """The test scoped to ``batches``; with ``floor`` as a merge runs it (only the rows as new as
    the batches' oldest change), else reading every row of the touched keys."""
    scope: dict = {"dynamodb_test_batches": {"orders": batches}}
    dbt_process.dbt_invoke(
        ["test", "--select", "stg_dynamodb__orders+", "--vars", json.dumps(scope)],
        {"dynamodb_test_floor": True} if floor else None,
    )


def _fails(batches: list[str] | None, found: str) -> None:
    """The test (scoped to ``batches``; whole with None) fails, naming ``found``."""
    with pytest.raises(dbt_process.DbtError) as failed:
        _test(batches) if batches is not None else _test_whole()
    assert f"orders: {found}" in str(failed.value) or f", {found}" in str(failed.value), failed


def _latest(changes) -> dict[tuple[str, str], str]:
    """Each key's latest change in ``changes`` (ingestion.dynamodb.change_order), by its batch."""
    from pyspark.sql import functions as F

    from ingestion.dynamodb import change_order

    latest = changes.groupBy(*KEYS).agg(F.max_by("_batch_id", change_order.change_order()))
    return {(r[0], r[1]): r[2] for r in latest.collect()}


def _test_whole() -> None:
    """A plain `dbt test`: whole tables, as after a first load."""
    dbt_process.dbt_invoke(["test", "--select", "stg_dynamodb__orders+"])


def _compiled(test: str = TEST) -> str:
    """The compiled SQL of the test named ``test``, as the last dbt command ran it: from
    ``run_results.json`` (the manifest a merge keeps is the parsed one, not a compiled one:
    ingestion/merge/dbt_manifest.py)."""
    results = settings.project_dir() / "target" / "run_results.json"
    ran = json.loads(results.read_text())["results"]
    (result,) = [r for r in ran if r["unique_id"].split(".")[2] == test]
    return str(result["compiled_code"])


def _floor(compiled: str) -> int | None:
    """The oldest `_version` a scoped test reads from (``_dynamodb_tested_floor``), or None."""
    found = set(re.findall(r"`_version` >= (-?\d+)", compiled))
    assert len(found) <= 1, found
    return int(found.pop()) if found else None


def _persisted(spark) -> set[int]:
    """The ids of the RDDs this session keeps persisted (a cached frame, once read)."""
    return set(spark.sparkContext._jsc.getPersistentRDDs().keys())


def _null_files_read(spark) -> int:
    """The data files the test's null checks read (its ``nulls`` query, as compiled: Iceberg's
    planned scan tasks; a file whose null counts rule out every row is not planned)."""
    found = re.search(r"with nulls as \((.*?)\n\),", _compiled(), re.S)
    assert found is not None
    scan = found.group(1)[found.group(1).index("from ") :]  # its scan, without the counts
    return spark.sql(f"select 1 {scan}").rdd.getNumPartitions()


def _duplicate(spark, key: tuple[str, str], null: bool = False) -> None:
    """A second row of ``key``, told apart by its `_batch_id` ('duplicate'); with ``null``, in
    the same data file, a third with a null `_version` (a later delete of one of the two writes a
    position delete: the file's metadata still counts the null)."""
    names = [f"`{c}`" for c in spark.table("lake.lakehouse.orders").columns]
    rows = [
        ", ".join("'duplicate' as `_batch_id`" if c == "`_batch_id`" else c for c in names),
        ", ".join(
            "'duplicate' as `_batch_id`"
            if c == "`_batch_id`"
            else ("cast(null as bigint) as `_version`" if c == "`_version`" else c)
            for c in names
        ),
    ][: 2 if null else 1]
    spark.sql(
        "insert into lake.lakehouse.orders "
        + " union all ".join(
            f"select {row} from lake.lakehouse.orders where {_where(key)}" for row in rows
        )
    )


def test_merge_tests_the_touched_keys_and_full_checks_test_all(
    spark,
    clean_lakehouse,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    full = sample_exports.write_samples(tmp_path, 120, 5, ["orders"])["orders"]
    first, second = orders_chain.write_orders_chain(tmp_path, 120, 5, increments=2)
    assert cli.main(["sync", "--table", "orders", str(full)]) == 0
    assert cli.main(["ingest", "--table", "orders", str(first)]) == 0
    (batch,) = merge_log.new_batches(spark, "orders")
    staged = spark.table("lake.staging.orders")
    touched = _keys(staged.where(f"_batch_id = '{batch}'"))
    untouched = sorted(_keys(spark.table("lake.lakehouse.orders")) - touched)
    _delete(spark, untouched[0])  # damage outside what the next merge touches

    # The merge's test looks at the touched keys only: it passes, and costs what the merge
    # costs. Its counts come from the merge's commit alone: the touched keys are never read,
    # and nothing is left cached.
    read: list[str] = []
    keys_read = TouchedKeys._read
    persisted = _persisted(spark)  # earlier tests' (this session is the run's)
    with monkeypatch.context() as patched:
        patched.setattr(
            TouchedKeys, "_read", lambda self, *a: read.append("keys") or keys_read(self, *a)
        )
        assert cli.main(["merge", "--table", "orders"]) == 0
    assert read == []
    assert _persisted(spark) <= persisted
    assert "`_batch_id` in (" in _compiled() and _floor(_compiled()) is not None

    capsys.readouterr()
    # A full check finds the damage, and says what it found.
    assert cli.main(["merge", "--table", "orders", "--full-check"]) == 2
    err = capsys.readouterr().err
    assert "dbt test" in err and "orders: rows missing 1" in err
    assert cli.main(["maintain", "--table", "orders"]) == 2

    # Damage inside the scope is found by the scoped test, and not by a test of other keys.
    assert cli.main(["ingest", "--table", "orders", str(second)]) == 0
    (later,) = merge_log.new_batches(spark, "orders")
    assert cli.main(["merge", "--table", "orders"]) == 0  # the earlier damage is out of scope
    # The changes a scoped test reads are its batches' and newer ones: the change log's older
    # rows (the full export's) are not read, and each touched key's latest change is the same
    # as in the whole log, also for the earlier batch, whose keys the later one changed again.
    (orders,) = catalog_table.load([get_table("orders")], spark)
    for scope in ([later], [batch]):
        _test(scope, floor=True)
        oldest = _floor(_compiled())
        keys = TouchedKeys(spark)
        try:
            assert oldest == keys.oldest_version(orders, scope)  # the same bound, one query
            logged = spark.table("lake.staging.orders").join(
                keys.of(orders, scope), list(KEYS), "left_semi"
            )
            read_from = logged.where(f"_version >= {oldest}")
            assert 0 < read_from.count() < logged.count()  # the keys' full-export rows left out
            assert _latest(read_from) == _latest(logged)
            if scope == [batch]:  # a key whose latest change is the later batch's
                assert any(b == later for b in _latest(read_from).values())
        finally:
            keys.release()
    later_keys = _keys(spark.table("lake.staging.orders").where(f"_batch_id = '{later}'"))
    final = _keys(spark.table("lake.lakehouse.orders"))
    victim = sorted((touched & final) - later_keys)[0]
    _delete(spark, victim)
    _test([later])  # does not look at the first batch's keys
    _fails([batch], "rows missing 1")

    # Keys more than once: scoped too. A duplicate of a key out of scope passes, in scope fails.
    # Nulls: none, and the null checks read no data file (Iceberg skips each by its counts).
    assert _null_files_read(spark) == 0
    out_of_scope = sorted(final - later_keys - {victim})[0]
    _duplicate(spark, out_of_scope)
    _test([later])
    spark.sql("delete from lake.lakehouse.orders where `_batch_id` = 'duplicate'")
    _duplicate(spark, sorted(later_keys & final)[0])
    _fails([later], "keys more than once 1")
    spark.sql("delete from lake.lakehouse.orders where `_batch_id` = 'duplicate'")
    _test([later])
    # A null (on a row out of scope): the metadata counts it, its file is read, the test fails.
    # Deleted again: the metadata still counts it (a position delete hides its row), so the file
    # is still read, and the test passes.
    _duplicate(spark, out_of_scope, null=True)
    spark.sql(
        "delete from lake.lakehouse.orders where `_batch_id` = 'duplicate' and `_version` is not "
        "null"
    )
    _fails([later], "null _version 1")
    spark.sql("delete from lake.lakehouse.orders where `_version` is null")
    _test([later])
    assert _null_files_read(spark) == 1

    # A touched key's row older than the tested batches (a row the MERGE should have replaced
    # and did not): the merge's test reads the rows as new as the batches' oldest change, so it
    # does not see it; a `dbt test` of the touched keys, and the whole-table check of `merge
    # --full-check` and `maintain`, do (the guarantee moved there).
    stale = sorted(later_keys & final)[0]
    _test([later], floor=True)
    oldest = _floor(_compiled())
    assert oldest is not None
    _duplicate(spark, stale)
    spark.sql(
        f"update lake.lakehouse.orders set `_version` = {oldest - 1} where `_batch_id` = "
        f"'duplicate'"
    )
    _test([later], floor=True)  # as the merge reads: not seen
    _fails([later], "keys more than once 1")  # a `dbt test` of the touched keys reads it
    capsys.readouterr()
    assert cli.main(["merge", "--table", "orders", "--full-check"]) == 2  # damage above, too
    assert "keys more than once 1" in capsys.readouterr().err
    spark.sql("delete from lake.lakehouse.orders where `_batch_id` = 'duplicate'")
    assert cli.main(["merge", "--table", "orders", "--full-check"]) == 2
    assert "keys more than once" not in capsys.readouterr().err


# The tests a final table's YAML listed before dynamodb_final_table, each what it checked.
SIX_TESTS = {
    "dynamodb_unique_combination_of_columns_orders_customer_id__order_id": "keys once",
    "dynamodb_no_deleted_keys_orders_orders": "no deleted key",
    "dynamodb_rows_match_latest_changes_orders_orders": "rows at their latest change",
    "dynamodb_not_null_orders_customer_id": "key not null",
    "dynamodb_not_null_orders_order_id": "key not null",
    "dynamodb_not_null_orders__operation": "_operation not null",
    "dynamodb_not_null_orders__version": "_version not null",
}

# Each damage a final table can take, as SQL on `lake.lakehouse.orders` ({key}: a live key's
# condition, {deleted}: a deleted key's), and what the one test names.
DAMAGES = {
    "a deleted key present": (None, "deleted keys present 1"),
    "a row missing": ("delete from {t} where {key}", "rows missing 1"),
    "a row no change wrote": (
        "insert into {t} select 'nobody' as customer_id, {rest} from {t} where {key}",
        "rows no change leaves 1",
    ),
    "a row at an older version": (
        "update {t} set `_version` = `_version` - 1 where {key}",
        "rows not at their latest change 1",
    ),
    "a key twice": ("insert into {t} select * from {t} where {key}", "keys more than once 1"),
    "a null key": (
        "insert into {t} select null as customer_id, {rest} from {t} where {key}",
        "null keys 1",
    ),
    "a null _operation": ("update {t} set `_operation` = null where {key}", "null _operation 1"),
    "a null _version": ("update {t} set `_version` = null where {key}", "null _version 1"),
}


def test_every_damage_the_six_tests_caught_fails_the_one_test_naming_it(
    spark, clean_lakehouse, project_copy: Path, tmp_path: Path
) -> None:
    """The six tests the YAML listed before (kept for a YAML that lists them, run here beside
    the one test) and the one test, on the same damaged table: every damage fails one of the
    six, and the one test, which says what it found."""
    yml = project_copy / "models" / "marts" / "orders.yml"
    text = yml.read_text()
    six = (
        "      - dynamodb_unique_combination_of_columns:\n"
        "          arguments:\n            combination_of_columns: [customer_id, order_id]\n"
        "      - dynamodb_no_deleted_keys:\n          arguments:\n            table: orders\n"
        "      - dynamodb_rows_match_latest_changes:\n"
        "          arguments:\n            table: orders\n"
    )
    text = text.replace("    data_tests:\n", "    data_tests:\n" + six, 1)
    for column in ("customer_id", "order_id", "_operation", "_version"):
        text = re.sub(
            rf"(\n      - name: {column}\n        description: [^\n]*\n)",
            r"\1        data_tests: [dynamodb_not_null]\n",
            text,
        )
    yml.write_text(text)
    full = sample_exports.write_samples(tmp_path, 60, 5, ["orders"])["orders"]
    (first,) = orders_chain.write_orders_chain(tmp_path, 60, 5, increments=1)
    assert cli.main(["sync", "--table", "orders", str(full)]) == 0
    assert cli.main(["sync", "--table", "orders", str(first)]) == 0
    t = "lake.lakehouse.orders"
    columns = spark.table(t).columns
    rest = ", ".join(f"`{c}`" for c in columns if c != "customer_id")
    live = sorted(_keys(spark.table(t)))[0]
    latest = spark.sql(
        "select customer_id, order_id, max_by(_operation, struct(_version, _sequence)) as op "
        "from lake.staging.orders group by customer_id, order_id"
    )
    (deleted,) = [(r[0], r[1]) for r in latest.where("op = 'delete'").limit(1).collect()]
    staged_delete = (
        "insert into {t} select {names} from (select *, cast(null as string) as "
        "`_inserted_batch_id` from lake.staging.orders where {deleted} and _operation = "
        "'delete')"
    )
    _test_whole()  # undamaged: all pass
    clean = spark.sql(
        f"select snapshot_id from {t}.snapshots order by committed_at desc limit 1"
    ).first()[0]
    results = settings.project_dir() / "target" / "run_results.json"
    for damage, (sql, found) in DAMAGES.items():
        statement = (sql or staged_delete).format(
            t=t,
            key=_where(live),
            deleted=_where(deleted),
            rest=rest,
            names=", ".join(f"`{c}`" for c in columns),
        )
        spark.sql(statement)
        with pytest.raises(dbt_process.DbtError) as failed:
            _test_whole()
        ran = json.loads(results.read_text())["results"]
        status = {r["unique_id"].split(".")[2]: r["status"] for r in ran}
        caught = [SIX_TESTS[n] for n in SIX_TESTS if status.get(n) == "fail"]
        assert caught, (damage, status)  # a damage the six tests caught...
        assert status[TEST] == "fail", (damage, status)  # ... fails the one test
        assert f"orders: {found}" in str(failed.value), (damage, str(failed.value))
        spark.sql(f"call lake.system.rollback_to_snapshot('lakehouse.orders', {clean})")
    _test_whole()  # and the table as it was passes again


def _lines(folder: Path) -> list[dict]:
    return [
        json.loads(line)
        for path in sorted((folder / "data").glob("*.json.gz"))
        for line in gzip.open(path, "rt")
    ]


def test_a_first_load_is_tested_from_its_record_counts(
    spark, clean_lakehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first build copies one full export (macros/one_full_export.sql): the test answers
    its change-log checks from Iceberg's record counts and reads only the keys, and `merge
    --full-check` scans (macros/test_scope.sql, dynamodb_copied_full_export)."""
    full = sample_exports.write_samples(tmp_path, 80, 5, ["orders"])["orders"]
    assert cli.main(["sync", "--table", "orders", str(full)]) == 0
    compiled = _compiled()
    assert "record_count" in compiled and "max_by" not in compiled and "group by" in compiled

    # `merge --full-check` scans, whatever the metadata says.
    assert cli.main(["merge", "--table", "orders", "--full-check"]) == 0
    assert "max_by" in _compiled()

    # The counts bite: a staged row of a key the final table lacks (written by hand, no ledger
    # entry, in a file of its own) fails them; removed again (its whole file), they pass.
    def one_row_of(relation: str) -> str:
        names = spark.table(relation).columns
        columns = ", ".join(
            "'nobody' as customer_id" if c == "customer_id" else f"`{c}`" for c in names
        )
        return f"select {columns} from {relation} limit 1"

    spark.sql(f"insert into lake.staging.orders {one_row_of('lake.staging.orders')}")
    _fails(None, "rows missing 1")
    assert "record_count" in _compiled()
    spark.sql("delete from lake.staging.orders where customer_id = 'nobody'")
    _test_whole()
    assert "record_count" in _compiled()

    # Any later write to the final table (here a row of that key) ends the proof: the test
    # scans, and finds the row no change staged.
    spark.sql(f"insert into lake.lakehouse.orders {one_row_of('lake.lakehouse.orders')}")
    _fails(None, "rows no change leaves 1")
    assert "max_by" in _compiled()


def test_a_full_export_with_a_key_written_twice_is_refused(
    spark, clean_lakehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full export holds each item once. One whose key is written twice (by hand) builds a
    final table the test refuses (its keys); the batch is not recorded as merged."""
    full = sample_exports.write_samples(tmp_path / "good", 40, 5, ["orders"])["orders"]
    lines = _lines(full)
    twice = [*lines, {"Item": {**lines[0]["Item"], "status": {"S": "written again"}}}]
    rng = random.Random(3)
    altered = sample_exports.write_export(
        tmp_path / "altered", "orders", [iter(twice)], sample_exports.full_export_time(5), rng
    )
    capsys.readouterr()
    assert cli.main(["sync", "--table", "orders", str(altered)]) == 2
    assert "orders: keys more than once 1" in capsys.readouterr().err
    # Refused while the test took the record counts (equal: the copy has both rows).
    assert "record_count" in _compiled()
    assert merge_log.new_batches(spark, "orders")  # not recorded: the next merge tests again
