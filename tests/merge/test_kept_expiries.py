"""`ttl_deletes: keep` through later full exports: a TTL-expired item is in no later export by
definition, so the full-export baseline must not remove its kept row (finding 1 of the audit: every
kept row was lost at the next full export, and by `rebuild`). Through the CLI, as the audit
reproduced it; the expected state is computed in plain Python
(``expected_state.expected_items``)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from items_back import final_items, strict_item, strict_items
from support import book

from ingestion.cli import main
from ingestion.samples import expected_state, sample_exports
from ingestion.samples import stream as sample_stream
from ingestion.samples.items import BASE_TIME
from ingestion.sources.change_file_writer import write_batch

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def final_rows(spark) -> dict[str, tuple[str, str]]:
    """Each row of the final table: id -> (title, _operation)."""
    spark.sql("refresh table lake.lakehouse.books")
    rows = spark.table("lake.lakehouse.books").select("id", "title", "_operation").collect()
    return {r["id"]: (r["title"], r["_operation"]) for r in rows}


def images(spark) -> dict[str, dict]:
    return {json.dumps([item["id"]]): strict_item(item) for item, _ in final_items(spark, "books")}


def at(minutes: int) -> int:
    return int((BASE_TIME + timedelta(minutes=minutes)).timestamp())


def export(tmp_path: Path, name: str, items: list[dict], minutes: int) -> Path:
    moment = BASE_TIME + timedelta(minutes=minutes)
    return sample_exports.write_items_export(tmp_path / name, "books", items, moment, seed=minutes)


def stream(location: Path, records: list[dict]) -> None:
    written, failed = write_batch(records, str(location))
    assert failed is None and written


def test_a_kept_ttl_expiry_stays_through_later_full_exports_rebuild_and_drift_adoption(
    spark, clean_lakehouse, project_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = project_copy / "dbt_project.yml"
    config.write_text(
        config.read_text().replace(
            "      partition_key: id:S\n", "      partition_key: id:S\n      ttl_deletes: keep\n", 1
        )
    )
    k1, k2, k3 = book("k1", "one"), book("k2", "two"), book("k3", "three")
    f0 = export(tmp_path, "f0", [k1, k2, k3], 0)
    assert main(["sync", "--table", "books", str(f0)]) == 0

    # The stream: k1 expires (TTL), k2 is modified.
    location = tmp_path / "streams"
    k2b = book("k2", "two, modified")
    stream(
        location,
        [
            sample_stream.stream_record(
                "books", "REMOVE", {"id": k1["id"]}, k1, None, at(10), 1, ttl=True
            ),
            sample_stream.stream_record("books", "MODIFY", {"id": k2["id"]}, k2, k2b, at(11), 2),
        ],
    )
    f1 = export(tmp_path, "f1", [k2b, k3], 60)  # a later full export, without k1 (expired)
    # (computed before the sync, which deletes the change files it staged)
    expected = expected_state.expected_items([f0, location / "books", f1], ["id"], ttl_keep=True)
    sync_stream = ["sync", "--table", "books", "--stream", str(location), "--settle", "0"]
    assert main(sync_stream) == 0
    assert final_rows(spark)["k1"] == ("one", "ttl_delete")

    # The full export: the kept row stays.
    assert main(["sync", "--table", "books", str(f1)]) == 0
    rows = final_rows(spark)
    assert rows == {
        "k1": ("one", "ttl_delete"),
        "k2": ("two, modified", "snapshot"),
        "k3": ("three", "snapshot"),
    }
    assert images(spark) == strict_items(expected)

    # rebuild (the full build from the change log) keeps it, and so does a drift adoption
    # (`pages`, bigint, given 1.5: staging rebuilt with a wider type, the final table refreshed).
    assert main(["rebuild", "--table", "books"]) == 0
    assert final_rows(spark) == rows
    drift = tmp_path / "drift"
    sync_drift = ["sync", "--table", "books", "--stream", str(drift), "--settle", "0"]
    k2c = {**k2b, "pages": {"N": "1"}}  # a new column, bigint
    stream(
        drift,
        [sample_stream.stream_record("books", "MODIFY", {"id": k2["id"]}, k2b, k2c, at(64), 3)],
    )
    assert main(sync_drift) == 0
    k2c = {**k2b, "pages": {"N": "1.5"}}  # a value that does not fit it
    stream(
        drift,
        [sample_stream.stream_record("books", "MODIFY", {"id": k2["id"]}, k2b, k2c, at(65), 4)],
    )
    capsys.readouterr()
    assert main(sync_drift) == 0
    assert "drift adopted (pages)" in capsys.readouterr().out
    assert final_rows(spark) == {**rows, "k2": ("two, modified", "update")}
    spark.sql("refresh table lake.lakehouse.books")
    assert dict(spark.table("lake.lakehouse.books").dtypes)["pages"] == "decimal(38,1)"

    # Staged together and merged at once: k3 expires, then a full export in which k1 exists
    # again (created anew) and k3 does not: k3's kept row comes in, k1's kept row is replaced.
    later = tmp_path / "later"
    stream(
        later,
        [
            sample_stream.stream_record(
                "books", "REMOVE", {"id": k3["id"]}, k3, None, at(70), 3, ttl=True
            )
        ],
    )
    k1b = book("k1", "one, created again")
    f2 = export(tmp_path, "f2", [k1b, k2b], 120)
    expected = expected_state.expected_items([f0, f1, later / "books", f2], ["id"], ttl_keep=True)
    assert main(["ingest", "--table", "books", "--stream", str(later), "--settle", "0"]) == 0
    assert main(["ingest", "--table", "books", str(f2)]) == 0
    assert main(["merge", "--table", "books"]) == 0
    rows = final_rows(spark)
    assert rows == {
        "k1": ("one, created again", "snapshot"),
        "k2": ("two, modified", "snapshot"),
        "k3": ("three", "ttl_delete"),
    }
    assert images(spark) == strict_items(expected)
    assert main(["rebuild", "--table", "books"]) == 0
    assert final_rows(spark) == rows
