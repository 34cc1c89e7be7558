"""Hostile attribute names and extreme items, end to end: export -> staging -> dbt merge.

Real Spark, Iceberg and dbt. The items are `books` items with extra attributes; the books schema
file is restored after each test (new attributes are added to it by the ingest).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
import readers
from conftest import reset_lakehouse
from items_back import final_items
from support import ROOT

from ingestion.dynamodb.naming import column_name
from ingestion.dynamodb.tables import get_table
from ingestion.merge import runner
from ingestion.samples import sample_exports
from ingestion.staging import append
from ingestion.staging.exports import ingest_export

pytestmark = [pytest.mark.slow, pytest.mark.integration]

EVIL = "x` string); drop table lakehouse.books; --"
HOSTILE = [
    EVIL,
    "it's",
    'say "hi"',
    "a;b",
    "--comment",
    "select",
    "from",
    "order",
    "`",
    "Ünïcode név",
]


@pytest.fixture
def books_schema(spark) -> Iterator[Path]:
    path = Path(os.environ["LAKEHOUSE_SCHEMA_DIR"]) / "books.json"
    saved = path.read_text()
    reset_lakehouse(spark)
    yield path
    path.write_text(saved)
    reset_lakehouse(spark)


def full_book(i: int, **extra: dict) -> dict:
    return {
        "id": {"S": f"b{i}"},
        "title": {"S": f"Title {i}"},
        "author": {"S": "A"},
        "price": {"N": "9.5"},
        "pages": {"N": "100"},
        "in_stock": {"BOOL": True},
        **extra,
    }


def tables(spark) -> set[str]:
    return {
        f"{ns}.{r['tableName']}"
        for ns in ("staging", "lakehouse")
        for r in spark.sql(f"show tables in lake.{ns}").collect()
    }


def test_hostile_attribute_names_become_ordinary_columns(
    spark, books_schema: Path, tmp_path: Path
) -> None:
    values = {name: {"S": f"value of {name}"} for name in HOSTILE if name != "order"}
    values["order"] = {"N": "3"}
    nested = {"M": {EVIL: {"S": "inner"}, "it's": {"N": "1"}}}
    items = [full_book(1, **values, evil_map=nested), full_book(2, **{EVIL: {"S": "second"}})]
    export = sample_exports.write_items_export(tmp_path, "books", items)
    books = get_table("books")
    result = ingest_export(spark, books, str(export))
    assert result.rows == 2
    runner.run_merge(spark, [books])  # dbt run + dbt test
    assert tables(spark) == {
        "staging.books",
        "staging.dynamodb_lakehouse_merges",
        "lakehouse.books",
    }  # nothing dropped or created

    final = {r["id"]: r.asDict() for r in spark.table("lake.lakehouse.books").collect()}
    assert set(final) == {"b1", "b2"}
    evil = column_name(EVIL)
    assert evil == "x_string_drop_table_lakehouse_books_"
    assert final["b1"][evil] == f"value of {EVIL}" and final["b2"][evil] == "second"
    assert final["b1"]["select"] == "value of select" and final["b1"]["order"] == 3
    assert final["b1"]["_"] == "value of `"
    assert final["b1"][column_name("Ünïcode név")] == "value of Ünïcode név"
    inner = final["b1"]["evil_map"]
    assert inner is not None and "inner" in json.dumps(
        inner.asDict() if hasattr(inner, "asDict") else inner
    )
    # Columns and remainder give back every name exactly.
    image = {item["id"]["S"]: item for item, _ in final_items(spark, "books")}["b1"]
    assert image[EVIL] == {"S": f"value of {EVIL}"} and image["evil_map"] == nested


def test_empty_and_extreme_items(spark, books_schema: Path, tmp_path: Path) -> None:
    books = get_table("books")
    # An export with zero items: staged as an empty batch, the ledger knows it (its merge, a
    # re-baseline: tests/merge/test_rebaseline_counts.py).
    empty = sample_exports.write_items_export(tmp_path / "empty", "books", [])
    done = ingest_export(spark, books, str(empty))
    assert done.rows == 0 and not done.skipped
    assert ingest_export(spark, books, str(empty)).skipped

    # A 400 KB item (DynamoDB's maximum) and a map nested 32 levels deep.
    deep: dict = {"S": "bottom"}
    for level in range(32):
        deep = {"M": {f"l{level}": deep}}
    items = [
        full_book(1, blob={"S": "x" * (400 * 1024 - 200)}),
        full_book(2, tags={"SS": ["a", "b"]}),
        full_book(3, deep=deep),
    ]
    assert len(json.dumps(items[0]).encode()) <= 400 * 1024
    export = sample_exports.write_items_export(tmp_path / "extreme", "books", items, seed=1)
    result = ingest_export(spark, books, str(export))
    assert result.rows == 3
    runner.run_merge(spark, [books])
    final = {r["id"]: r.asDict() for r in spark.table("lake.lakehouse.books").collect()}
    assert len(final["b1"]["blob"]) == 400 * 1024 - 200
    assert final["b2"]["tags"] == ["a", "b"]
    # Every level is there (as nested structs, or as JSON text beyond the nesting limit).
    deep_value = final["b3"]["deep"]
    value = (
        json.loads(deep_value) if isinstance(deep_value, str) else deep_value.asDict(recursive=True)
    )
    for level in reversed(range(32)):
        value = json.loads(value) if isinstance(value, str) else value  # JSON text from here
        value = value[f"l{level}"]
    assert value == "bottom"
    assert append.applied_sources(spark, "books") >= {done.source, result.source}


def test_item_with_a_thousand_attributes(tmp_path: Path) -> None:
    """1,000 attributes (numbers, strings, decimals) become 1,000 columns, end to end. Their
    decode expressions stay small (lambdas are evaluated interpreted, not compiled), so the plan
    and the generated code fit the driver's heap.

    `ddb-lakehouse sync` runs in a Spark process of its own, with a lakehouse of its own: the
    largest plans and generated code of the suite. In the shared test JVM it could run the heap
    out on a busy machine (Janino's code generation) and fail every test after it: an
    OutOfMemoryError fails this test alone. DuckDB reads the final table (no JVM here)."""
    kinds = [
        lambda i: {"N": str(i)},
        lambda i: {"S": f"s{i}"},
        lambda i: {"N": f"{i}.25"},
        lambda i: {"N": f"{i}E+2"},
    ]
    attributes = {f"attr_{i:04d}": kinds[i % 4](i) for i in range(1000)}
    export = sample_exports.write_items_export(
        tmp_path / "x", "books", [full_book(1, **attributes)]
    )
    home = tmp_path / "home"
    shutil.copytree(ROOT / "schemas", home / "schemas")
    env = {
        **os.environ,
        "LAKEHOUSE_HOME": str(home),
        "LAKEHOUSE_SCHEMA_DIR": str(home / "schemas"),
        "PYSPARK_PYTHON": sys.executable,
    }
    command = [sys.executable, "-m", "ingestion.cli", "sync", "--table", "books", str(export)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    con = readers.connect()
    staged = readers.metadata_location(home, "staging", "books")
    assert con.execute(f"select count(*) from iceberg_scan('{staged}')").fetchone() == (1,)
    location = readers.metadata_location(home, "lakehouse", "books")
    result = con.execute(f"select * from iceberg_scan('{location}')")
    names = [d[0] for d in result.description]
    (values,) = result.fetchall()
    row = dict(zip(names, values, strict=True))
    assert len([c for c in row if c.startswith("attr_")]) == 1000
    assert (row["attr_0000"], row["attr_0001"], row["attr_0002"]) == (0, "s1", Decimal("2.25"))
    assert row["attr_0003"] == 300 and row["attr_0999"] == 99900  # 3E+2, 999E+2: integers
