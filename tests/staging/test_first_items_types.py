"""A first batch's types come from its first items and are proven while it is staged
(``detect.first_items_schema``, ``Schema.sampled``): the same types as a detection over every
item (``detect-schema``), whatever the later items hold; a value they do not describe exactly
makes the staging pass fail before its commit (no staging table left), and the batch is detected
whole and staged again. Real Spark and Iceberg; the later item's typed values checked against it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingestion.catalog import schema_choice, table_types
from ingestion.dynamodb.tables import get_table
from ingestion.project import onboarding
from ingestion.samples import sample_exports
from ingestion.schema import canonical, detect, schema_file, typed_columns
from ingestion.sources import manifest
from ingestion.staging import append, exports

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
    return _types(schema_choice.with_keys(table, exports.detect_table_schema(spark, export, table)))


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
    monkeypatch.setattr(
        detect, "detect_images", lambda *a, **k: whole.append(a) or every_item(*a, **k)
    )
    result = _ingest(spark, folder)
    assert not whole  # no pass over every item
    assert result.schema_changes[0].startswith(f"schema detected from the first {FIRST} items")
    assert _staged_types(spark) == _whole(spark, folder)
    kept = json.loads(table_types.stored_document(spark, "t") or "{}")
    assert kept["sampled"] == FIRST and kept["items"] == FIRST
    _assert_staged_exactly(spark, [_item(0), _item(19), *later])


LATER = {
    "new-attribute": {**_item(40), "added": {"S": "first seen later"}},
    "fraction-in-bigint": {**_item(40), "n": {"N": "2.5"}},
    "beyond-bigint": {**_item(40), "n": {"N": "9" * 20}},
    "more-fraction-digits": {**_item(40), "price": {"N": "1.125"}},
    "beyond-decimal": {**_item(40), "price": {"N": "1" * 37 + ".25"}},
    "nested-fraction": {
        **_item(40),
        "lines": {"L": [{"M": {"sku": {"S": "x"}, "qty": {"N": "0.5"}}}]},
    },
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
    assert "sampled" not in json.loads(table_types.stored_document(spark, "t") or "{}")
    assert spark.table("lake.staging.t").count() == 21
    _assert_staged_exactly(spark, [_item(3), later])


def _assert_staged_exactly(spark, items: list[dict]) -> None:
    """Each item's staged row, encoded back by ``schema.canonical`` (which shares nothing with
    the decode), equals the item, value by value; no row drifted."""
    schema = table_types.stored_schema(spark, get_table("t"))
    assert schema is not None
    rows = {r["id"]: r.asDict(recursive=True) for r in spark.table("lake.staging.t").collect()}
    assert all(r["_drift"] is None for r in rows.values())
    for item in items:
        held = canonical.encode_row(rows[item["id"]["S"]], schema)
        assert canonical.different_attributes(canonical.canonical_item(item), held) == [], item


def test_detect_schema_never_samples(spark, table_t, tmp_path: Path) -> None:
    folder = _export(tmp_path, [LATER["fraction-in-bigint"]])
    export = manifest.read_export(str(folder))
    detected = exports.detect_table_schema(spark, export, get_table("t"))
    assert detected.sampled is None and detected.items == 21
    assert "sampled" not in schema_file.to_json(detected)


def test_items_wider_than_the_typed_decode_are_detected_whole(
    spark, table_t, tmp_path: Path
) -> None:
    wide = {f"a{i:03d}": {"N": str(i)} for i in range(typed_columns.TYPED_ATTRIBUTES)}
    folder = sample_exports.write_items_export(tmp_path / "wide", "t", [{"id": {"S": "a"}, **wide}])
    result = _ingest(spark, folder)
    assert result.schema_changes[0].endswith("(1 items)")  # every item, before staging
    assert _staged_types(spark) == _whole(spark, folder)


def test_a_pass_that_fails_leaves_no_staging_table(
    spark, table_t, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table comes into being with the commit that proves the first items' types: a pass
    that fails (here, then the detection after it) leaves nothing, so the next run starts over."""
    folder = _export(tmp_path, [LATER["fraction-in-bigint"]])

    def interrupted(*args, **kwargs):
        raise RuntimeError("interrupted after the first pass")

    monkeypatch.setattr(detect, "detect_images", interrupted)
    with pytest.raises(RuntimeError, match="interrupted"):
        exports.ingest_export(spark, get_table("t"), str(folder))
    assert not spark.catalog.tableExists("lake.staging.t")
    monkeypatch.setattr(detect, "detect_images", _every_item)
    _ingest(spark, folder)
    assert _staged_types(spark)["n"] == "decimal(38,1)"


_every_item = detect.detect_images


@pytest.mark.parametrize("when", ["before-the-write", "during-the-write"])
def test_a_table_created_meanwhile_by_another_process_fails_the_run_clearly(
    spark, table_t, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """Another process creates the staging table after this one chose its first items' types:
    before the write (seen when it starts) or during it (its create fails). Nothing of this run
    is staged, its unproven types are not kept, and it says what to do."""
    folder = _export(tmp_path, [])
    chosen = detect.first_items_schema

    def other_process_creates_it(*args, **kwargs):
        spark.sql("create table lake.staging.t (id string) using iceberg")
        return chosen(*args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(detect, "first_items_schema", other_process_creates_it)
        if when == "during-the-write":  # the table not seen before the write starts
            real = spark.catalog.tableExists
            patched.setattr(
                spark.catalog, "tableExists", lambda name: "staging" not in name and real(name)
            )
        with pytest.raises(
            append.StagingError,
            match=r"another process created `lake`.`staging`.`t` while this one staged its first "
            r"batch; run the command again",
        ):
            exports.ingest_export(spark, get_table("t"), str(folder))
    assert spark.table("lake.staging.t").count() == 0  # nothing staged by this run
    assert table_types.stored_document(spark, "t") is None  # its types not kept


def test_a_schema_files_declared_types_are_kept_on_a_first_load(
    spark, table_t, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A person's declared type is no detection record: no check against the first items, and
    the same type as a detection over every item; a declared name is kept."""
    monkeypatch.setenv("LAKEHOUSE_SCHEMA_DIR", str(tmp_path / "schemas"))  # this test's own
    schema_file.schema_path("t").parent.mkdir()
    declared = {"n": {"type": "string"}, "note": {"column": "remark"}}  # a type, and a name
    schema_file.schema_path("t").write_text(json.dumps({"attributes": declared}))
    folder = _export(tmp_path, [LATER["fraction-in-bigint"]])
    result = _ingest(spark, folder)
    assert result.schema_changes[0].startswith(f"schema detected from the first {FIRST} items")
    assert _staged_types(spark) == _whole(spark, folder) and _staged_types(spark)["n"] == "string"
    assert "remark" in spark.table("lake.staging.t").columns
    _assert_staged_exactly(spark, [LATER["fraction-in-bigint"]])


@pytest.mark.parametrize(
    "first, later",
    [
        ({"e": {"M": {}}}, {"e": {"M": {"now": {"S": "a key"}}}}),
        ({"e": {"L": []}}, {"e": {"L": [{"N": "1"}]}}),
        # a nested text path that holds maps: their keys count towards the attribute's paths
        ({"e": {"M": {"x": {"M": {"k": {"S": "v"}}}}}}, {"e": {"M": {"x": {"S": "text"}}}}),
    ],
    ids=["only-empty-maps", "only-empty-lists", "nested-text-holding-maps"],
)
def test_first_items_whose_text_types_staging_cannot_prove_are_detected_whole(
    spark, table_t, tmp_path: Path, first: dict, later: dict
) -> None:
    items = [{"id": {"S": f"a{i}"}, **first} for i in range(FIRST)] + [{"id": {"S": "b"}, **later}]
    if "x" in str(first):  # both shapes among the first items: text at e.x
        items = items[:1] + items[-1:] + [{"id": {"S": f"c{i}"}, **first} for i in range(5)]
    folder = sample_exports.write_items_export(tmp_path / "export", "t", items)
    result = _ingest(spark, folder)
    assert result.schema_changes[0].endswith(f"({len(items)} items)")  # every item, first
    assert _staged_types(spark) == _whole(spark, folder)


def test_a_streams_first_batch_stages_with_every_items_types(
    spark, table_t, tmp_path: Path
) -> None:
    from ingestion.samples import stream as sample_stream
    from ingestion.samples.items import BASE_TIME
    from ingestion.sources.change_file_writer import write_batch
    from ingestion.staging import streams

    items = [_item(i) for i in range(20)] + [LATER["nested-fraction"]]
    start = int(BASE_TIME.timestamp())
    records = [
        sample_stream.stream_record("t", "INSERT", {"id": i["id"]}, None, i, start + n, n + 1)
        for n, i in enumerate(items)
    ]
    for n, old in enumerate(
        [None, {**_item(7), "id": {"S": "gone1"}}]
    ):  # deletes: Keys alone, with the old image
        key = {"id": {"S": f"gone{n}"}}
        records.append(
            sample_stream.stream_record("t", "REMOVE", key, old, None, start + 50, 90 + n)
        )
    location = tmp_path / "streams"
    assert write_batch(records, str(location))[1] is None
    result = streams.ingest_stream(spark, get_table("t"), str(location), settle_seconds=0)
    assert result.changes == len(items) + 2
    assert result.schema_changes[1].startswith(f"the first {FIRST} items' types did not hold")
    lines = _types(table_types.stored_schema(spark, get_table("t")))["lines"]
    assert lines == "array<struct<`qty`:decimal(38,1),`sku`:string>>"
    _assert_staged_exactly(spark, [items[0], items[-1]])
