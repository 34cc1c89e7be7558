"""A lakehouse staged before decision 0012 (the change log and the final table keep the whole item
in ``_image`` and have no ``_rest``) keeps working as it is: later batches are staged in its form,
merged, their drift reported from ``_image``; and ``rebuild`` moves it to the new form (the
remainder ``_rest``, no ``_image``) in one commit per table, every item given back unchanged."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from items_back import final_items, items_of, strict_item
from pyspark.sql import functions as F
from verifying import export_items

from ingestion.catalog import ledger, table_types
from ingestion.cli import main
from ingestion.dynamodb.tables import get_table
from ingestion.samples import sample_exports
from ingestion.samples.items import BASE_TIME
from ingestion.schema import item_json
from ingestion.staging import drift
from ingestion.staging.exports import ingest_export

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def to_older_form(spark, name: str, namespaces: tuple[str, ...] = ("staging", "lakehouse")) -> None:
    """Rewrite ``name``'s staging and final tables as a version before decision 0012 left them:
    ``_image`` (the whole item, from the encoder) in place of ``_rest``; history kept (one
    overwrite commit each: the ledger's entries stay in the snapshots before it)."""
    schema = table_types.stored_schema(spark, get_table(name))
    assert schema is not None
    for namespace in namespaces:
        table = f"lake.{namespace}.{name}"
        final = item_json.final_table_schema(schema, name)
        rows = item_json.with_staged_image(spark.table(table), final).drop("_rest")
        older = spark.createDataFrame(rows.collect(), rows.schema)  # read whole before writing
        spark.sql(f"alter table {table} add column _image string")
        spark.sql(f"alter table {table} drop column _rest")
        older.select(*spark.table(table).columns).writeTo(table).overwrite(F.lit(True))


def columns(spark, table: str) -> list[str]:
    spark.sql(f"refresh table {table}")
    return spark.table(table).columns


def keyed(pairs) -> dict[str, dict]:
    return {item["id"]["S"]: strict_item(item) for item, _ in pairs}


def later_export(tmp_path: Path, items: list[dict], days: int) -> Path:
    moment = BASE_TIME + timedelta(days=days)
    return sample_exports.write_items_export(tmp_path / str(days), "books", items, moment)


def test_an_older_change_log_keeps_working_and_rebuild_moves_it_to_the_remainder(
    spark, clean_lakehouse, samples, tmp_path: Path
) -> None:
    assert main(["sync", "--table", "books", str(samples["books"])]) == 0
    to_older_form(spark, "books")
    assert "_rest" not in columns(spark, "lake.staging.books")
    sources = {e.source for e in ledger.entries(spark, "books")}

    # A later export is staged and merged in the table's own form.
    items = export_items(samples["books"])
    items[0] = {**items[0], "title": {"S": "changed"}, "discontinued_at": {"NULL": True}}
    assert main(["sync", "--table", "books", str(later_export(tmp_path, items, 1))]) == 0
    for table in ("lake.staging.books", "lake.lakehouse.books"):
        assert "_image" in columns(spark, table) and "_rest" not in columns(spark, table)
    assert keyed(final_items(spark, "books")) == {i["id"]["S"]: strict_item(i) for i in items}

    # A value that does not fit its column: reported from the whole item, with Spark or without.
    items[1] = {**items[1], "pages": {"S": "many"}}
    ingest_export(spark, get_table("books"), str(later_export(tmp_path, items, 2)))
    (found,) = drift.drift_report(spark, "books")
    assert (found.attribute, json.loads(found.example)) == ("pages", {"S": "many"})
    assert [d.example for d in drift.drift_report_without_spark("books")] == [found.example]

    assert main(["rebuild", "--table", "books"]) == 0
    for table in ("lake.staging.books", "lake.lakehouse.books"):  # the new form
        assert "_rest" in columns(spark, table) and "_image" not in columns(spark, table)
    assert sources <= {e.source for e in ledger.entries(spark, "books")}  # the ledger carried
    want = {i["id"]["S"]: strict_item(i) for i in items}
    assert keyed(final_items(spark, "books")) == want  # pages is text now: "many" has a column
    staged = items_of(spark.table("lake.staging.books"), spark, "books")
    assert len(staged) == 3 * len(items)  # every staged row kept, each given back exactly
    newest = max(row["_version"] for _, row in staged)
    assert keyed([(i, r) for i, r in staged if r["_version"] == newest]) == want


def test_a_final_table_left_with_image_by_a_rebuild_stopped_before_its_refresh_is_built_again(
    spark, clean_lakehouse, samples, tmp_path: Path
) -> None:
    """Staging in the new form, the final table still in the older one (a rebuild killed between
    its replace and the final table's refresh): the next merge builds the final table again."""
    assert main(["sync", "--table", "books", str(samples["books"])]) == 0
    to_older_form(spark, "books", ("lakehouse",))
    items = export_items(samples["books"])
    items[0] = {**items[0], "title": {"S": "changed"}}
    assert main(["sync", "--table", "books", str(later_export(tmp_path, items, 1))]) == 0
    assert "_rest" in columns(spark, "lake.lakehouse.books")
    assert "_image" not in columns(spark, "lake.lakehouse.books")
    assert keyed(final_items(spark, "books")) == {i["id"]["S"]: strict_item(i) for i in items}
