"""The rules of changes are written once in Python (ingestion/dynamodb/change_order.py) and once in
macros (macros/change_order.sql, delete_operations.sql, baseline.sql): compiled by the real dbt, the
macros say the same, and on real rows the macro's order picks the same latest change as Python's."""

from __future__ import annotations

import pytest
import yaml
from dbt_compile import compile_inline
from pyspark.sql import functions as F

from ingestion.config import settings
from ingestion.dynamodb import change_order


def _configured_tables() -> dict:
    """The project's table configuration as dbt reads it (vars replace it whole)."""
    project = yaml.safe_load((settings.project_dir() / "dbt_project.yml").read_text())
    return dict(project["vars"]["dynamodb_tables"])


def _sql_list(values: tuple[str, ...]) -> str:
    return "(" + ", ".join(f"'{v}'" for v in values) + ")"


@pytest.mark.slow
@pytest.mark.integration
def test_macros_mirror_the_python_rules(spark) -> None:
    compiled = compile_inline(
        "{{ dynamodb_change_order() }}|{{ dynamodb_all_delete_operations() }}|"
        "{{ dynamodb_delete_operations('books') }}|{{ dynamodb_delete_operations('kept') }}|"
        "{{ dynamodb_newest_full_export_sql('t') }}|"
        "{{ dynamodb_removes_the_row('books', 100) }}|{{ dynamodb_removes_the_row('kept', 100) }}",
        {
            "dynamodb_tables": {
                **_configured_tables(),
                "kept": {"partition_key": "id:S", "ttl_deletes": "keep"},
            }
        },
    )
    order, every_delete, books, kept, baseline, books_removes, kept_removes = compiled.split("|")
    assert order == change_order.change_order_sql()
    assert every_delete == _sql_list(change_order.DELETE_OPERATIONS)
    assert books == _sql_list(change_order.deleting_operations("delete"))
    assert kept == _sql_list(change_order.deleting_operations("keep"))
    assert f"`_operation` = '{change_order.SNAPSHOT}'" in baseline
    # The baseline (floor 100): a change older than the newest full export removes its row,
    # except a kept TTL expiry (an expired item is in no later export).
    changes = (
        "values ('snapshot', 50), ('update', 50), ('ttl_delete', 50), ('ttl_delete', 150), "
        "('delete', 150), ('update', 150)"
    )
    removed = {
        name: [
            r[0]
            for r in spark.sql(
                f"select {sql} from ({changes}) as c(`_operation`, `_version`)"
            ).collect()
        ]
        for name, sql in (("books", books_removes), ("kept", kept_removes))
    }
    assert removed == {
        "books": [True, True, True, True, True, False],
        "kept": [True, True, False, False, True, False],
    }


@pytest.mark.slow
def test_the_macro_order_and_the_python_order_pick_the_same_change(spark) -> None:
    rows = [
        # key, version, sequence, ingested_at, batch, operation
        ("a", 10, None, "2026-01-01 00:00:00", "b1", "snapshot"),
        ("a", 20, "0002", "2026-01-01 00:00:01", "b2", "update"),
        ("a", 20, "0002", "2026-01-01 00:00:01", "b2", "delete"),  # equal: a delete wins
        ("b", 30, "0009", "2026-01-01 00:00:00", "b1", "update"),
        ("b", 30, "0010", "2026-01-01 00:00:00", "b1", "upsert"),  # the sequence decides
        ("c", 5, None, "2026-01-01 00:00:00", "b1", "insert"),
        ("c", 5, None, "2026-01-01 00:00:02", "b3", "upsert"),  # then the ingestion time
        ("d", 7, None, "2026-01-01 00:00:00", "b1", "ttl_delete"),
        ("d", 7, None, "2026-01-01 00:00:00", "b1", "update"),  # a TTL expiry is a delete
    ]
    frame = spark.createDataFrame(
        rows,
        "k string, _version bigint, _sequence string, _ingested_at string, "
        "_batch_id string, _operation string",
    ).withColumn("_ingested_at", F.col("_ingested_at").cast("timestamp"))
    frame.createOrReplaceTempView("changes_in_test")
    by_macro = {
        r["k"]: r["_operation"]
        for r in spark.sql(
            "select k, max_by(_operation, "
            + compile_inline("{{ dynamodb_change_order() }}")
            + ") as _operation from changes_in_test group by k"
        ).collect()
    }
    latest = frame.groupBy("k").agg(F.max(F.struct(change_order.change_order(), "_operation")))
    by_python = {r[0]: r[1]["_operation"] for r in latest.collect()}
    assert by_macro == by_python == {"a": "delete", "b": "upsert", "c": "upsert", "d": "ttl_delete"}


def test_the_change_order_reads_only_the_columns_the_final_table_test_selects() -> None:
    """The final table's test reads only the change log's keys and change-order columns
    (macros/tests/dynamodb_final_table.sql, `dynamodb_change_order_columns`), then orders them by
    `dynamodb_change_order`: every column the order names must be in that list, or the test reads
    a missing column."""
    import re

    columns = compile_inline("{{ dynamodb_change_order_columns() | join(',') }}").split(",")
    order = compile_inline("{{ dynamodb_change_order() }}")
    named = set(re.findall(r"`(_[a-z_]+)`", order))
    assert named and named <= set(columns), (named, columns)
