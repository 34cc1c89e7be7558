"""The data tests of a merge look at the keys its batches touched; `merge --full-check` and
`maintain` test whole tables. (They read the whole final table and change log twice after every
merge: their cost grew with the table, not with the changes.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingestion import cli
from ingestion.lake import merge, merge_log
from ingestion.samples import exports as sample_exports
from ingestion.samples import orders_chain

pytestmark = [pytest.mark.slow, pytest.mark.integration]

KEYS = ("customer_id", "order_id")


def _keys(frame) -> set[tuple[str, str]]:
    return {(r[0], r[1]) for r in frame.select(*KEYS).collect()}


def _delete(spark, key: tuple[str, str]) -> None:
    spark.sql(
        f"delete from lake.lakehouse.orders where customer_id = '{key[0]}' and order_id = '{key[1]}'"
    )


def _test(batches: list[str]) -> None:
    merge.dbt_invoke(
        ["test", "--select", "stg_dynamodb__orders+", "--vars",
         json.dumps({"dynamodb_test_batches": {"orders": batches}})]
    )  # fmt: skip


def test_merge_tests_the_touched_keys_and_full_checks_test_all(
    spark, clean_lakehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
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
    assert cli.main(["merge", "--table", "orders"]) == 0
    capsys.readouterr()
    # A full check finds the damage.
    assert cli.main(["merge", "--table", "orders", "--full-check"]) == 2
    assert "dbt test" in capsys.readouterr().err
    assert cli.main(["maintain", "--table", "orders"]) == 2

    # Damage inside the scope is found by the scoped tests, and not by tests of other keys.
    assert cli.main(["ingest", "--table", "orders", str(second)]) == 0
    (later,) = merge_log.new_batches(spark, "orders")
    assert cli.main(["merge", "--table", "orders"]) == 0  # the earlier damage is out of scope
    later_keys = _keys(spark.table("lake.staging.orders").where(f"_batch_id = '{later}'"))
    final = _keys(spark.table("lake.lakehouse.orders"))
    victim = sorted((touched & final) - later_keys)[0]
    _delete(spark, victim)
    _test([later])  # does not look at the first batch's keys
    with pytest.raises(merge.DbtError):
        _test([batch])
