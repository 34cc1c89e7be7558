"""A first batch's types come from its first items and are proven while it is staged
(``detect.first_items_schema``, ``Schema.sampled``): the same types as a detection over every
item (``detect-schema``), whatever the later items hold; a value they do not describe exactly
makes the staging pass fail before its commit, and the batch is detected whole and staged again.
Real Spark and Iceberg; every staged value checked against its item."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from ingestion.config import clock
from ingestion.dynamodb.tables import get_table
from ingestion.project import onboarding
from ingestion.samples import exports as sample_exports
from ingestion.schema import detect, schema_file
from ingestion.sources import manifest
from ingestion.staging import append, exports, table_types

pytestmark = pytest.mark.slow

FIRST = 5  # the first items the types are learnt from (detect.SAMPLE_ITEMS, made small)


def _item(i: int) -> dict:
    return {
        "id": {"S": f"i{i:03d}"},
        "n": {"N": str(i)},
        "price": {"N": f"{i}.25"},
        "note": {"NULL": True},
        "tags": {"SS": ["a", f"t{i}"]},
        "shipping": {"M": {"city": {"S": "Oslo"}, "zip": {"N": "150"}}},
        "lines": {"L": [{"M": {"sku": {"S": "x"}, "qty": {"N": "2"}}}]},
    }


def _export(tmp_path: Path, later: list[dict]) -> Path:
    items = [_item(i) for i in range(20)] + later
    return sample_exports.write_items_export(tmp_path / "export", "t", items)


def _types(schema) -> dict[str, str]:
    return {a.name: a.type.sql() for a in schema.attributes}


def _staged_types(spark) -> dict[str, str]:
    stored = table_types.stored_schema(spark, get_table("t"))
    assert stored is not None
    return _types(stored)


def _whole(spark, folder: Path) -> dict[str, str]:
    """The types a detection over every item gives (what `detect-schema` writes)."""
    export = manifest.read_export(str(folder), verify=False)
    table = get_table("t")
    return _types(exports.with_keys(table, detect.detect_export(spark, export, table)))


@pytest.fixture
def table_t(project_copy, clean_lakehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    onboarding.add_table("t", "id:S", None)
    monkeypatch.setattr(detect, "SAMPLE_ITEMS", FIRST)


def _ingest(spark, folder: Path) -> exports.IngestResult:
    result = exports.ingest_export(spark, get_table("t"), str(folder))
    assert result.rows == result.expected and not result.drift
    return result


def test_items_that_fit_the_first_items_types_are_staged_in_one_pass(
    spark, table_t, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only NULL seen first, S later: text either way, so it fits.
    later = [{**_item(30), "note": {"S": "now text"}}, {"id": {"S": "j"}}]  # and attributes absent
    folder = _export(tmp_path, later)
    whole, every_item = [], detect.detect_images
    monkeypatch.setattr(detect, "detect_images", lambda *a, **k: whole.append(a) or every_item(*a, **k))  # fmt: skip
    result = _ingest(spark, folder)
    assert not whole  # no pass over every item
    assert result.schema_changes[0].startswith(f"schema detected from the first {FIRST} items")
    assert _staged_types(spark) == _whole(spark, folder)
    kept = json.loads(table_types.stored_document(spark, "t") or "{}")
    assert kept[table_types.SAMPLED] == FIRST and kept["items"] == FIRST
    rows = {r["id"]: r for r in spark.table("lake.staging.t").collect()}
    assert rows["i030"]["note"] == "now text" and rows["i007"]["price"] == Decimal("7.25")
    assert rows["j"]["n"] is None and rows["i019"]["lines"][0]["qty"] == 2


LATER = {
    "new-attribute": {**_item(40), "added": {"S": "first seen later"}},
    "fraction-in-bigint": {**_item(40), "n": {"N": "2.5"}},
    "more-fraction-digits": {**_item(40), "price": {"N": "1.125"}},
    "beyond-decimal": {**_item(40), "price": {"N": "1" * 37 + ".25"}},
    "nested-fraction": {
        **_item(40),
        "lines": {"L": [{"M": {"sku": {"S": "x"}, "qty": {"N": "0.5"}}}]},
    },  # fmt: skip
    "new-map-key": {**_item(40), "shipping": {"M": {"city": {"S": "Oslo"}, "gate": {"S": "B"}}}},
    "null-then-number": {**_item(40), "note": {"N": "3"}},
    "text-then-number": {**_item(40), "shipping": {"M": {"city": {"N": "7"}, "zip": {"N": "1"}}}},
    "set-then-list": {**_item(40), "tags": {"L": [{"S": "a"}]}},
    "map-then-text": {**_item(40), "shipping": {"S": "unknown"}},
}


@pytest.mark.parametrize("case", sorted(LATER))
def test_a_later_value_the_first_items_do_not_describe_stages_with_every_items_types(
    spark, table_t, tmp_path: Path, case: str
) -> None:
    later = LATER[case]
    folder = _export(tmp_path, [later])
    result = _ingest(spark, folder)
    assert result.schema_changes[1].startswith(f"the first {FIRST} items' types did not hold")
    assert _staged_types(spark) == _whole(spark, folder)
    assert table_types.SAMPLED not in json.loads(table_types.stored_document(spark, "t") or "{}")
    assert spark.table("lake.staging.t").count() == 21
    # The later item's values whole: the widened column holds them exactly (or their text).
    (row,) = spark.table("lake.staging.t").where("id = 'i040'").collect()
    image = json.loads(row["_image"])
    assert image == later
    for name in ("n", "price", "note"):
        value = later[name]
        if "N" in value and row[name] is not None:
            assert Decimal(str(row[name])) == Decimal(value["N"])


def test_an_uncommitted_table_of_the_first_items_types_is_replaced(
    spark, table_t, tmp_path: Path
) -> None:
    """What a staging pass killed before its commit leaves: the table, created with the first
    items' types, and no commit. The same ingest again proves or replaces them."""
    folder = _export(tmp_path, [LATER["fraction-in-bigint"]])
    export = manifest.read_export(str(folder))
    table = get_table("t")
    first, _ = exports.schema_for(
        spark, table, "x", lambda: detect.export_images(spark, export), "s"
    )
    assert first.sampled == FIRST and _types(first)["n"] == "bigint"
    rows = append.read_export(spark, export, first, "b", clock.utc_now())
    append._ensure_table(spark, table, rows, first)
    assert table_types.provisional(spark, "t")
    again = table_types.current_schema(spark, table)
    assert again is not None and again.sampled == FIRST  # still to be proven

    result = _ingest(spark, folder)
    assert not table_types.provisional(spark, "t")
    assert _staged_types(spark)["n"] == "decimal(38,1)" == _whole(spark, folder)["n"]
    assert result.rows == 21
    proven = table_types.current_schema(spark, table)
    assert proven is not None and proven.sampled is None


def test_detect_schema_never_samples(spark, table_t, tmp_path: Path) -> None:
    folder = _export(tmp_path, [LATER["fraction-in-bigint"]])
    export = manifest.read_export(str(folder))
    detected = exports.detect_table_schema(spark, export, get_table("t"))
    assert detected.sampled is None and detected.items == 21
    assert table_types.SAMPLED not in schema_file.to_json(detected)
