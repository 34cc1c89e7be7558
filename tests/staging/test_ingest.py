"""Ingestion with real Spark and real Iceberg: typed decoding, one commit per export, the ledger."""

from __future__ import annotations

import base64
import gzip
import json
import shutil
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from items_back import items_of, strict_item
from verifying import export_items

from ingestion.catalog import table_types
from ingestion.dynamodb.tables import get_table
from ingestion.dynamodb.values import sql_string
from ingestion.samples import sample_exports
from ingestion.samples.items import BASE_TIME
from ingestion.schema.item_json import set_descriptor
from ingestion.sources import manifest
from ingestion.staging import append, exports
from ingestion.staging.exports import ingest_export

pytestmark = pytest.mark.slow


def _raw_items(folder: Path) -> dict[str, dict]:
    export = manifest.read_export(folder, verify=False)
    items = {}
    for data_file in export.files:
        for line in gzip.decompress(data_file.path.read_bytes()).decode().splitlines():
            item = json.loads(line)["Item"]
            items[item["id"]["S"]] = item
    return items


def _snapshots(spark, table: str) -> int:
    if not spark.catalog.tableExists(f"lake.staging.{table}"):
        return 0
    return spark.table(f"lake.staging.{table}.snapshots").count()


def _rewrite_manifest_md5(folder: Path, data_file: Path) -> None:
    """Make the manifest agree with a hand-edited data file (to reach Spark-side checks)."""
    lines = (folder / "manifest-files.json").read_text().splitlines()
    fixed = []
    for line in lines:
        entry = json.loads(line)
        if entry["dataFileS3Key"].endswith(data_file.name):
            entry["md5Checksum"] = manifest.md5_base64(data_file)
        fixed.append(json.dumps(entry))
    (folder / "manifest-files.json").write_text("\n".join(fixed) + "\n")
    (folder / "manifest-files.md5").write_text(manifest.md5_base64(folder / "manifest-files.json"))


@pytest.fixture
def books_export(samples: dict[str, Path], tmp_path: Path) -> Path:
    """A private copy of the books sample export, safe to damage."""
    copy = tmp_path / "books" / "AWSDynamoDB" / samples["books"].name
    shutil.copytree(samples["books"], copy)
    return copy


def test_full_export_is_staged_typed_in_one_commit(spark, clean_lakehouse, samples) -> None:
    table = get_table("books")
    result = ingest_export(spark, table, str(samples["books"]))
    assert (result.rows, result.expected, result.skipped) == (60, 60, False)
    assert _snapshots(spark, "books") == 1

    back = items_of(spark.table("lake.staging.books"), spark, "books")
    rows = {r["id"]: r for _, r in back}
    items = {r["id"]: item for item, r in back}
    raw = _raw_items(samples["books"])
    assert set(rows) == set(raw)
    for key, item in raw.items():  # Spark's decoding against Python's own json
        row = rows[key]
        assert row["title"] == item["title"]["S"]
        assert row["price"] == Decimal(item["price"]["N"])
        assert row["pages"] == int(item["pages"]["N"])
        assert row["in_stock"] is item["in_stock"]["BOOL"]
        assert row["tags"] == sorted(item["tags"]["SS"])  # sets: sorted
        assert row["ratings"] == sorted(int(x) for x in item["ratings"]["NS"])
        assert bytes(row["cover_thumbnail"]) == base64.b64decode(item["cover_thumbnail"]["B"])
        details = item["details"]["M"]
        assert row["details"].asDict() == {
            "language": details["language"]["S"],
            "publisher": details["publisher"]["S"],
            "year": int(details["year"]["N"]),
        }
        assert [(e["format"], e["price"]) for e in row["editions"]] == [
            (e["M"]["format"]["S"], Decimal(e["M"]["price"]["N"])) for e in item["editions"]["L"]
        ]
        assert row["_drift"] is None
        assert row["subtitle"] == item.get("subtitle", {}).get("S")
        assert row["discontinued_at"] is None  # NULL or absent
        assert strict_item(items[key]) == strict_item(item)  # lossless: the item, as received
        assert row["_operation"] == "snapshot"
        assert row["_source"].endswith(samples["books"].name)
        assert row["_source_file"].endswith(".json.gz")


def test_second_ingest_of_an_export_is_a_no_op(spark, clean_lakehouse, samples) -> None:
    table = get_table("books")
    ingest_export(spark, table, str(samples["books"]))
    again = ingest_export(spark, table, str(samples["books"]))
    assert again.skipped and again.rows == 0
    assert _snapshots(spark, "books") == 1
    assert spark.table("lake.staging.books").count() == 60
    assert append.applied_sources(spark, "books") == {again.source}


def _edit_first_item(folder: Path, edit) -> Path:
    export = manifest.read_export(folder, verify=False)
    data_file = next(f.path for f in export.files if f.item_count)
    lines = gzip.decompress(data_file.read_bytes()).decode().splitlines()
    lines[0] = edit(lines[0])
    data_file.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    _rewrite_manifest_md5(folder, data_file)
    return data_file


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (
            lambda line: line.replace('"id":{"S":', '"ident":{"S":'),
            "key attribute 'id' is missing",
        ),
        (
            lambda line: line.replace('"id":{"S":"book-', '"id":{"N":"1'),
            "key attribute 'id' is not a value that fits string",
        ),
        (lambda line: "this is not json", "not a DynamoDB JSON item"),
        (
            lambda line: line.replace('"title":{"S":', '"title":{"Q":', 1),
            "unknown type descriptor",
        ),
    ],
    ids=["missing-key", "key-of-another-type", "not-json", "unknown-type-descriptor"],
)
def test_bad_items_stop_the_ingest_and_nothing_is_staged(
    spark, clean_lakehouse, books_export, edit, reason
) -> None:
    data_file = _edit_first_item(books_export, edit)
    with pytest.raises(append.StagingError) as failure:
        ingest_export(spark, get_table("books"), str(books_export))
    message = str(failure.value)
    assert reason in message
    assert data_file.name in message  # names the file
    assert "nothing staged" in message
    assert _snapshots(spark, "books") == 0  # no commit at all


@pytest.mark.parametrize(
    "edit",
    [
        lambda line: line.replace('"price":{"N":', '"price":{"S":', 1),
        lambda line: line.replace('"price":{"N":"', '"price":{"N":"0.001', 1),
        lambda line: line.replace('"pages":{"N":"', '"pages":{"N":"0.5', 1),
    ],
    ids=["wrong-type", "more-fraction-digits", "fraction-in-bigint"],
)
def test_values_that_do_not_fit_are_staged_and_reported_not_lost(
    spark, clean_lakehouse, books_export, edit
) -> None:
    _edit_first_item(books_export, edit)
    result = ingest_export(spark, get_table("books"), str(books_export))
    assert result.rows == 60
    (drift,) = result.drift
    assert drift.rows == 1 and drift.source == result.source
    damaged = spark.table("lake.staging.books").where("_drift is not null").collect()
    assert len(damaged) == 1
    attribute = damaged[0]["_drift"][0]
    assert damaged[0][attribute] is None  # never rounded or truncated
    assert json.loads(damaged[0]["_rest"])[attribute] == json.loads(drift.example)  # whole


def test_damaged_export_is_refused_before_spark_reads_it(
    spark, clean_lakehouse, books_export
) -> None:
    export = manifest.read_export(books_export, verify=False)
    data_file = next(f.path for f in export.files if f.item_count)
    data_file.write_bytes(data_file.read_bytes()[:-8])  # truncated gzip
    with pytest.raises(manifest.ExportError, match="MD5"):
        ingest_export(spark, get_table("books"), str(books_export))
    assert _snapshots(spark, "books") == 0


def test_line_count_differing_from_item_count_is_refused_before_staging(
    spark, clean_lakehouse, books_export
) -> None:
    export = manifest.read_export(books_export, verify=False)
    data_file = next(f.path for f in export.files if f.item_count)
    lines = gzip.decompress(data_file.read_bytes()).decode().splitlines()
    data_file.write_bytes(gzip.compress(("\n".join(lines[1:]) + "\n").encode()))  # one line less
    _rewrite_manifest_md5(books_export, data_file)  # the MD5 agrees: only the count is wrong
    with pytest.raises(manifest.ExportError) as failure:
        ingest_export(spark, get_table("books"), str(books_export))
    message = str(failure.value)
    assert data_file.name in message and f"{len(lines) - 1} lines" in message
    assert f"itemCount {len(lines)}" in message and "nothing staged" in message
    assert _snapshots(spark, "books") == 0


def test_corrupted_gzip_whose_md5_agrees_is_refused_naming_the_file(
    spark, clean_lakehouse, books_export
) -> None:
    export = manifest.read_export(books_export, verify=False)
    data_file = next(f.path for f in export.files if f.item_count)
    data = bytearray(data_file.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the deflate stream
    data_file.write_bytes(bytes(data))
    _rewrite_manifest_md5(books_export, data_file)  # the MD5 agrees: only the gzip is broken
    with pytest.raises((manifest.ExportError, append.StagingError)) as failure:
        ingest_export(spark, get_table("books"), str(books_export))
    message = str(failure.value)
    assert data_file.name in message and "nothing staged" in message
    assert _snapshots(spark, "books") == 0


def test_a_gzip_cut_short_whose_md5_agrees_is_refused_naming_the_file(
    spark, clean_lakehouse, books_export
) -> None:
    export = manifest.read_export(books_export, verify=False)
    data_file = next(f.path for f in export.files if f.item_count)
    data_file.write_bytes(data_file.read_bytes()[:-8])  # no end marker: the lines may be whole
    _rewrite_manifest_md5(books_export, data_file)
    with pytest.raises(manifest.ExportError) as failure:
        ingest_export(spark, get_table("books"), str(books_export))
    message = str(failure.value)
    assert data_file.name in message and "cut short" in message and "nothing staged" in message
    assert _snapshots(spark, "books") == 0


def _gzip_members(*texts: bytes) -> bytes:
    return b"".join(gzip.compress(t) for t in texts)


def test_the_driver_counts_lines_as_spark_reads_them(spark, books_export, tmp_path: Path) -> None:
    """``manifest.line_count`` (local files) and the Spark pass (files on S3) count alike:
    Hadoop's line ends (\\n, \\r, \\r\\n), a last line without an end, gzip members in a row,
    a line end split between two members, and more text than one read of the driver."""
    big = b"".join(b'{"Item":{"id":{"S":"%d"}}}\n' % i for i in range(120_000))
    files = {
        "plain": gzip.compress(b"a\nb\nc\n"),
        "no_end": gzip.compress(b"a\nb"),
        "crlf": gzip.compress(b"a\r\nb\r\n\r\nc"),
        "cr": gzip.compress(b"a\rb\r\rc\r"),
        "empty_lines": gzip.compress(b"\n\n\n"),
        "nothing": gzip.compress(b""),
        "members": _gzip_members(b"a\nb", b"c\n", b"", b"d"),
        "split_crlf": _gzip_members(b"a\r", b"\nb\r", b"c"),
        "big": gzip.compress(big) + gzip.compress(big[:1000]),
    }
    paths = []
    for name, data in files.items():
        path = tmp_path / f"{name}.json.gz"
        path.write_bytes(data)
        paths.append(path)
    export = replace(
        manifest.read_export(books_export, verify=False),
        files=tuple(manifest.DataFile(p, 0, "") for p in paths),
    )
    by_spark = exports._counted_by_spark(spark, export)
    by_driver = exports._counted_by_driver(export)
    assert by_driver == {p.name: by_spark.get(p.name, 0) for p in paths}
    assert (
        by_driver["big.json.gz"] == 120_000 + big[:1000].count(b"\n") + 1
        and by_driver["split_crlf.json.gz"] == 3
    )


def test_the_spark_pass_refuses_a_damaged_gzip_naming_its_export(spark, books_export) -> None:
    """The count of files on S3 (a Spark pass) fails as the driver's does, before staging."""
    export = manifest.read_export(books_export, verify=False)
    data_file = next(f.path for f in export.files if f.item_count)
    data = bytearray(data_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    data_file.write_bytes(bytes(data))
    with pytest.raises(manifest.ExportError, match="a data file cannot be read.*nothing staged"):
        exports._counted_by_spark(spark, export)


def test_a_new_column_is_added_without_an_error_in_the_log(
    spark, clean_lakehouse, tmp_path: Path
) -> None:
    """A batch that meets attributes the schema lacks stops on purpose and is staged again with
    them; Spark logged the stopped task as an ERROR with a Java stack trace first, which a user
    reads as a failure."""
    import os
    import subprocess
    import sys
    from datetime import timedelta

    from ingestion.samples import sample_exports
    from ingestion.samples.items import BASE_TIME

    first = [{"id": {"S": "a"}, "title": {"S": "A"}}]
    later = [{"id": {"S": "a"}, "title": {"S": "A"}, "shelf": {"S": "top"}}]
    one = sample_exports.write_items_export(tmp_path / "1", "books", first)
    two = sample_exports.write_items_export(
        tmp_path / "2", "books", later, moment=BASE_TIME + timedelta(hours=1), seed=2
    )
    ingest_export(spark, get_table("books"), str(one))
    command = [sys.executable, "-m", "ingestion.cli", "ingest", "--table", "books", str(two)]
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        command, cwd=root, env=dict(os.environ), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "new columns: 'shelf'" in done.stdout
    log = done.stdout + done.stderr
    assert "ERROR" not in log and "Exception in task" not in log, log[-3000:]


@pytest.mark.slow
@pytest.mark.integration
def test_rows_typed_before_another_process_changed_the_types_are_refused(
    spark, clean_lakehouse, samples, tmp_path: Path
) -> None:
    """The remainder is found by the types the run read; the encoder reads the kept ones. Had a
    rebuild meanwhile made `tags` stand for lists (it saw one), a set kept in its column would
    come back as a list: the append refuses, and nothing is staged."""
    books = get_table("books")
    ingest_export(spark, books, str(samples["books"]))
    older = table_types.current_schema(spark, books)
    assert older is not None and set_descriptor(older.get("tags")) == "SS"
    newer = replace(
        older,
        attributes=tuple(
            replace(a, info={**a.info, "dynamodb_types": {"SS": 9, "L": 1}})
            if a.name == "tags"
            else a
            for a in older.attributes
        ),
    )
    spark.sql(
        f"alter table lake.staging.books set tblproperties "
        f"('{table_types.PROPERTY}' = {sql_string(table_types.document(newer))})"
    )
    items = [{**item, "title": {"S": "later"}} for item in export_items(samples["books"])[:3]]
    later = sample_exports.write_items_export(
        tmp_path, "books", items, BASE_TIME + timedelta(days=1)
    )
    with pytest.raises(append.StagingError, match="changed since this run read them"):
        append.stage_export(spark, manifest.read_export(later), books, older)
    assert spark.table("lake.staging.books").count() == 60
