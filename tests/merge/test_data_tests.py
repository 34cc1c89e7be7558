"""The data tests of a merge look at the keys its batches touched; `merge --full-check` and
`maintain` test whole tables. (They read the whole final table and change log twice after every
merge: their cost grew with the table, not with the changes.) `not_null` on a final table reads no
data file when Iceberg's null counts prove the column has no null
(macros/tests/dynamodb_not_null.sql)."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from ingestion import cli
from ingestion.catalog import merge_log
from ingestion.catalog import table as catalog_table
from ingestion.config import settings
from ingestion.merge import dbt_process, merge_counts, tested_rows
from ingestion.merge.touched_keys import TouchedKeys
from ingestion.samples import orders_chain, sample_exports

pytestmark = [pytest.mark.slow, pytest.mark.integration]

KEYS = ("customer_id", "order_id")


def _keys(frame) -> set[tuple[str, str]]:
    return {(r[0], r[1]) for r in frame.select(*KEYS).collect()}


def _delete(spark, key: tuple[str, str]) -> None:
    spark.sql(
        f"delete from lake.lakehouse.orders where customer_id = '{key[0]}' and order_id = "
        f"'{key[1]}'"
    )


def _test(batches: list[str]) -> None:
    dbt_process.dbt_invoke(
        [
            "test",
            "--select",
            "stg_dynamodb__orders+",
            "--vars",
            json.dumps({"dynamodb_test_batches": {"orders": batches}}),
        ]
    )


def _test_cached(spark, batches: list[str]) -> None:
    """The scoped tests of ``batches`` as a merge runs them: each reads the touched rows the
    merge cached once (tested_rows.tested_views), never the final table or the change log."""
    from ingestion.dynamodb.tables import get_table

    touched = TouchedKeys(spark)
    orders = catalog_table.load([get_table("orders")], spark)
    views = tested_rows.tested_views(spark, orders, {"orders": batches}, touched)
    assert set(views["orders"]) == {"final", "changes"}
    assert len(_tested_views_left(spark)) == 2  # registered (and so found when left behind)
    run_vars = {"dynamodb_test_batches": {"orders": batches}, "dynamodb_tested_views": views}
    try:
        dbt_process.dbt_invoke(["test", "--select", "stg_dynamodb__orders+"], run_vars)
    finally:
        compiled = _compiled("dynamodb_no_deleted_keys_orders_orders")
        tested_rows.drop_views(spark, views)
        touched.release()
    assert views["orders"]["final"] in compiled and views["orders"]["changes"] in compiled
    assert "lakehouse.orders" not in compiled and "staging.orders" not in compiled


def _latest(changes) -> dict[tuple[str, str], str]:
    """Each key's latest change in ``changes`` (ingestion.dynamodb.change_order), by its batch."""
    from pyspark.sql import functions as F

    from ingestion.dynamodb import change_order

    latest = changes.groupBy(*KEYS).agg(F.max_by("_batch_id", change_order.change_order()))
    return {(r[0], r[1]): r[2] for r in latest.collect()}


def _tested_views_left(spark) -> list[str]:
    """The temporary views tested_rows.tested_views registers for `orders`, where still
    registered."""
    import hashlib

    suffix = hashlib.sha256(b"orders").hexdigest()[:12]
    catalog = spark._jsparkSession.sessionState().catalog()
    views = [f"dynamodb_tested_{side}_{suffix}" for side in ("final", "changes")]
    return [view for view in views if catalog.getTempView(view).isDefined()]


def _both(spark, batches: list[str], fails: bool) -> None:
    """The scoped tests, reading the tables and reading the cached rows: the same outcome."""
    for run in (lambda: _test(batches), lambda: _test_cached(spark, batches)):
        if fails:
            with pytest.raises(dbt_process.DbtError):
                run()
        else:
            run()


def _test_whole() -> None:
    """A plain `dbt test`: whole tables, as after a first load."""
    dbt_process.dbt_invoke(["test", "--select", "stg_dynamodb__orders+"])


def _compiled(test: str) -> str:
    """The compiled SQL of the test named ``test``: found through the manifest, since dbt names
    the file of a test whose name reaches 64 characters by a hash."""
    project = settings.project_dir()
    nodes = json.loads((project / "target" / "manifest.json").read_text())["nodes"].values()
    (node,) = [n for n in nodes if n["resource_type"] == "test" and n["name"] == test]
    return (project / node["compiled_path"]).read_text()


def _persisted(spark) -> set[int]:
    """The ids of the RDDs this session keeps persisted (a cached frame, once read)."""
    return set(spark.sparkContext._jsc.getPersistentRDDs().keys())


def _files_read(spark, test: str) -> int:
    """The data files the compiled SQL of the test named ``test`` reads (Iceberg's planned scan
    tasks: a file whose metrics rule out every row is not planned)."""
    return spark.sql(_compiled(test)).rdd.getNumPartitions()


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
    where = f"where customer_id = '{key[0]}' and order_id = '{key[1]}'"
    spark.sql(
        "insert into lake.lakehouse.orders "
        + " union all ".join(f"select {row} from lake.lakehouse.orders {where}" for row in rows)
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

    # The merge's tests look at the touched keys only: they pass, and cost what the merge costs.
    # Its counts take the rows the tests read as the state after the merge (`after_rows`).
    given: list[bool] = []
    counts = merge_counts.commit_counts
    persisted = _persisted(spark)  # earlier tests' (this session is the run's)
    with monkeypatch.context() as patched:
        patched.setattr(
            merge_counts,
            "commit_counts",
            lambda *a, **k: given.append(a[7] is not None) or counts(*a, **k),
        )
        assert cli.main(["merge", "--table", "orders"]) == 0
    assert given == [True]
    assert _tested_views_left(spark) == []  # the rows it cached for them are gone
    assert _persisted(spark) <= persisted  # and the touched keys too
    from ingestion.dynamodb.tables import get_table

    # Its counts took the rows its tests read as the state after the merge: the same counts as
    # the snapshot's, and rows that say otherwise change them (so those rows are what is read).
    (orders,) = catalog_table.load([get_table("orders")], spark)
    after = merge_counts.current_snapshot(spark, "orders")
    (parent,) = spark.sql(
        f"select parent_id from lake.lakehouse.orders.snapshots where snapshot_id = {after}"
    ).first()
    keys = TouchedKeys(spark)
    try:
        found = merge_counts.commit_counts(spark, orders, parent, after, [batch], keys)
        rows = spark.sql(f"select * from lake.lakehouse.orders version as of {after}")
        given = merge_counts.commit_counts(
            spark, orders, parent, after, [batch], keys, after_rows=rows
        )
        none = merge_counts.commit_counts(
            spark, orders, parent, after, [batch], keys, after_rows=rows.where("false")
        )
    finally:
        keys.release()
    assert found.updated > 0 and given == found
    assert (none.inserted, none.updated) == (0, 0) and none.deleted >= found.updated
    # A table whose rows cannot be read (no `books` here) after one that could: none left either.

    with pytest.raises(Exception, match="books"):
        tested_rows.tested_views(
            spark,
            catalog_table.load([get_table("orders"), get_table("books")], spark),
            {"orders": [batch], "books": ["x"]},
            TouchedKeys(spark),
        )
    assert _tested_views_left(spark) == []
    capsys.readouterr()
    # A full check finds the damage.
    assert cli.main(["merge", "--table", "orders", "--full-check"]) == 2
    assert "dbt test" in capsys.readouterr().err
    assert cli.main(["maintain", "--table", "orders"]) == 2

    # Damage inside the scope is found by the scoped tests, and not by tests of other keys.
    assert cli.main(["ingest", "--table", "orders", str(second)]) == 0
    (later,) = merge_log.new_batches(spark, "orders")
    assert cli.main(["merge", "--table", "orders"]) == 0  # the earlier damage is out of scope
    # The changes cached for a scope are its batches' and newer ones: the change log's older
    # rows (the full export's) are not read, and each touched key's latest change is the same
    # as in the whole log, also for the earlier batch, whose keys the later one changed again.
    for scope in ([later], [batch]):
        keys, views = TouchedKeys(spark), {}
        try:
            views = tested_rows.tested_views(spark, [orders], {"orders": scope}, keys)
            oldest = keys.oldest_version(orders, scope)
            cached = spark.table(views["orders"]["changes"])
            logged = spark.table("lake.staging.orders").join(
                keys.of(orders, scope), list(KEYS), "left_semi"
            )
            assert oldest is not None and cached.where(f"_version < {oldest}").count() == 0
            assert 0 < cached.count() < logged.count()  # the keys' full-export rows left out
            assert _latest(cached) == _latest(logged)
            if scope == [batch]:  # a key whose latest change is the later batch's
                assert any(b == later for b in _latest(cached).values())
        finally:
            tested_rows.drop_views(spark, views)
            keys.release()
    later_keys = _keys(spark.table("lake.staging.orders").where(f"_batch_id = '{later}'"))
    final = _keys(spark.table("lake.lakehouse.orders"))
    victim = sorted((touched & final) - later_keys)[0]
    _delete(spark, victim)
    _both(spark, [later], fails=False)  # does not look at the first batch's keys
    _both(spark, [batch], fails=True)

    # unique: scoped too. A duplicate of a key out of scope passes, of a key in scope fails.
    # not_null: nothing is null, and its SQL reads no data file (Iceberg skips each by its count).
    assert _files_read(spark, "dynamodb_not_null_orders__version") == 0
    out_of_scope = sorted(final - later_keys - {victim})[0]
    _duplicate(spark, out_of_scope)
    _both(spark, [later], fails=False)
    spark.sql("delete from lake.lakehouse.orders where `_batch_id` = 'duplicate'")
    _duplicate(spark, sorted(later_keys & final)[0])
    _both(spark, [later], fails=True)
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
    capsys.readouterr()
    with pytest.raises(dbt_process.DbtError):
        _test([later])
    assert "dynamodb_not_null_orders__version" in capsys.readouterr().out
    spark.sql("delete from lake.lakehouse.orders where `_version` is null")
    _test([later])
    assert _files_read(spark, "dynamodb_not_null_orders__version") == 1

    # A touched key's row older than the tested batches (a row the MERGE should have replaced
    # and did not): the rows a merge caches are those as new as the batches' oldest change, so
    # its scoped tests do not see it; the tests that read the tables, and the whole-table check
    # of `merge --full-check` and `maintain`, do (the guarantee moved there).
    stale = sorted(later_keys & final)[0]
    keys = TouchedKeys(spark)
    oldest = keys.oldest_version(orders, [later])
    keys.release()
    assert oldest is not None
    _duplicate(spark, stale)
    spark.sql(
        f"update lake.lakehouse.orders set `_version` = {oldest - 1} where `_batch_id` = "
        f"'duplicate'"
    )
    keys, views = TouchedKeys(spark), {}
    try:
        views = tested_rows.tested_views(spark, [orders], {"orders": [later]}, keys)
        cached = spark.table(views["orders"]["final"])
        assert cached.where(f"_version < {oldest}").count() == 0
        assert cached.count() == len(later_keys & final)  # each touched key's row, once
    finally:
        tested_rows.drop_views(spark, views)
        keys.release()
    _test_cached(spark, [later])
    with pytest.raises(dbt_process.DbtError):
        _test([later])
    capsys.readouterr()
    unique = "dynamodb_unique_combination_of_columns_orders"
    assert cli.main(["merge", "--table", "orders", "--full-check"]) == 2  # damage above, too
    assert unique in capsys.readouterr().out
    spark.sql("delete from lake.lakehouse.orders where `_batch_id` = 'duplicate'")
    assert cli.main(["merge", "--table", "orders", "--full-check"]) == 2
    assert unique not in capsys.readouterr().out


def _lines(folder: Path) -> list[dict]:
    return [
        json.loads(line)
        for path in sorted((folder / "data").glob("*.json.gz"))
        for line in gzip.open(path, "rt")
    ]


def test_a_first_load_is_tested_from_its_record_counts(
    spark, clean_lakehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first build copies one full export (macros/one_full_export.sql): its change-log tests
    are answered from Iceberg's record counts, the key test still reads the keys, and `merge
    --full-check` scans (macros/test_scope.sql, dynamodb_copied_full_export)."""
    full = sample_exports.write_samples(tmp_path, 80, 5, ["orders"])["orders"]
    assert cli.main(["sync", "--table", "orders", str(full)]) == 0
    rows_match = _compiled("dynamodb_rows_match_latest_changes_orders_orders")
    assert "record_count" in rows_match and "max_by" not in rows_match
    assert "where false" in _compiled("dynamodb_no_deleted_keys_orders_orders")
    assert "group by" in _compiled(
        "dynamodb_unique_combination_of_columns_orders_customer_id__order_id"
    )

    # `merge --full-check` scans, whatever the metadata says.
    assert cli.main(["merge", "--table", "orders", "--full-check"]) == 0
    assert "max_by" in _compiled("dynamodb_rows_match_latest_changes_orders_orders")

    # The counts bite: a staged row of a key the final table lacks (written by hand, no ledger
    # entry, in a file of its own) fails them; removed again (its whole file), they pass.
    def one_row_of(relation: str) -> str:
        names = spark.table(relation).columns
        columns = ", ".join(
            "'nobody' as customer_id" if c == "customer_id" else f"`{c}`" for c in names
        )
        return f"select {columns} from {relation} limit 1"

    spark.sql(f"insert into lake.staging.orders {one_row_of('lake.staging.orders')}")
    capsys.readouterr()
    with pytest.raises(dbt_process.DbtError):
        _test_whole()
    assert "record_count" in _compiled("dynamodb_rows_match_latest_changes_orders_orders")
    assert "dynamodb_rows_match_latest_changes_orders_orders" in capsys.readouterr().out
    spark.sql("delete from lake.staging.orders where customer_id = 'nobody'")
    _test_whole()
    assert "record_count" in _compiled("dynamodb_rows_match_latest_changes_orders_orders")

    # Any later write to the final table (here a row of that key) ends the proof: the tests
    # scan, and find the row no change staged.
    spark.sql(f"insert into lake.lakehouse.orders {one_row_of('lake.lakehouse.orders')}")
    with pytest.raises(dbt_process.DbtError):
        _test_whole()
    assert "max_by" in _compiled("dynamodb_rows_match_latest_changes_orders_orders")


def test_the_counts_answer_only_beside_the_key_test(
    spark, clean_lakehouse, project_copy: Path, tmp_path: Path
) -> None:
    """Equal counts prove the rows only with the keys proven unique: a final table whose YAML
    runs its key test at warn severity (or none) is tested by the scan."""
    yml = project_copy / "models" / "marts" / "orders.yml"
    text = yml.read_text()
    marker = "            combination_of_columns: [customer_id, order_id]\n"
    assert marker in text
    yml.write_text(text.replace(marker, marker + "          config:\n            severity: warn\n"))
    full = sample_exports.write_samples(tmp_path, 40, 5, ["orders"])["orders"]
    assert cli.main(["sync", "--table", "orders", str(full)]) == 0
    assert "max_by" in _compiled("dynamodb_rows_match_latest_changes_orders_orders")


def test_a_full_export_with_a_key_written_twice_is_refused(
    spark, clean_lakehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full export holds each item once. One whose key is written twice (by hand) builds a
    final table the key test refuses; the batch is not recorded as merged."""
    full = sample_exports.write_samples(tmp_path / "good", 40, 5, ["orders"])["orders"]
    lines = _lines(full)
    twice = [*lines, {"Item": {**lines[0]["Item"], "status": {"S": "written again"}}}]
    rng = random.Random(3)
    altered = sample_exports.write_export(
        tmp_path / "altered", "orders", [iter(twice)], sample_exports.full_export_time(5), rng
    )
    capsys.readouterr()
    assert cli.main(["sync", "--table", "orders", str(altered)]) == 2
    assert (
        "dynamodb_unique_combination_of_columns_orders_customer_id__order_id"
        in capsys.readouterr().out
    )
    # Refused while the change-log tests took the record counts (equal: the copy has both rows).
    assert "record_count" in _compiled("dynamodb_rows_match_latest_changes_orders_orders")
    assert merge_log.new_batches(spark, "orders")  # not recorded: the next merge tests again
