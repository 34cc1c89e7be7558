"""Sample exports: AWS's layout, correct checksums, realistic and deterministic."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

from ingestion.samples import sample_exports
from ingestion.sources import manifest


def _items(folder: Path) -> list[dict]:
    export = manifest.read_export(folder)
    return [
        json.loads(line)["Item"]
        for f in export.files
        for line in gzip.decompress(f.path.read_bytes()).decode().splitlines()
    ]


def test_layout_matches_aws(tmp_path: Path) -> None:
    folder = sample_exports.write_samples(tmp_path, items=50, seed=1, tables=["orders"])["orders"]
    assert folder.parent.name == "AWSDynamoDB"
    for name in (
        "_started",
        "manifest-summary.json",
        "manifest-files.json",
        "manifest-summary.md5",
        "manifest-files.md5",
    ):
        assert (folder / name).is_file(), name
    summary = json.loads((folder / "manifest-summary.json").read_text())
    assert summary["version"] == "2020-06-30"
    assert summary["exportArn"].endswith("/export/" + folder.name)
    # The ExportId starts with the export's millisecond timestamp, 14 digits.
    from datetime import datetime

    stamp = folder.name.split("-")[0]
    export_time = datetime.fromisoformat(summary["exportTime"].replace("Z", "+00:00"))
    assert len(stamp) == 14 and int(stamp) == int(export_time.timestamp() * 1000)
    entries = [json.loads(x) for x in (folder / "manifest-files.json").read_text().splitlines()]
    assert entries[0]["itemCount"] == 0
    assert all(
        e["dataFileS3Key"].startswith(f"exports/orders/AWSDynamoDB/{folder.name}/data/")
        for e in entries
    )
    manifest.verify_files(manifest.read_export(folder, verify=False))  # every md5 matches


def test_deterministic_for_a_seed(tmp_path: Path) -> None:
    a = sample_exports.write_samples(tmp_path / "a", items=40, seed=5)
    b = sample_exports.write_samples(tmp_path / "b", items=40, seed=5)
    c = sample_exports.write_samples(tmp_path / "c", items=40, seed=6)
    for table in ("books", "orders"):
        assert a[table].name == b[table].name
        assert (a[table] / "manifest-files.json").read_text() == (
            b[table] / "manifest-files.json"
        ).read_text()
        assert _items(a[table]) == _items(b[table])
        assert _items(a[table]) != _items(c[table])


def test_items_are_realistic(tmp_path: Path) -> None:
    folders = sample_exports.write_samples(tmp_path, items=400, seed=2)
    books = _items(folders["books"])
    types = Counter(t for item in books for value in item.values() for t in value)
    for descriptor in ("S", "N", "BOOL", "NULL", "B", "M", "L", "SS", "NS"):
        assert types[descriptor] > 0, descriptor
    with_subtitle = sum("subtitle" in item for item in books)
    assert 0 < with_subtitle < len(books)  # present only in some items
    assert any("." in item["price"]["N"] for item in books)  # decimals
    orders = _items(folders["orders"])
    keys = {(o["customer_id"]["S"], o["order_id"]["S"]) for o in orders}
    assert len(keys) == len(orders)
    assert len({o["customer_id"]["S"] for o in orders}) < len(orders)  # several orders a customer


def test_scales_across_files(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sample_exports, "ITEMS_PER_FILE", 100)
    folder = sample_exports.write_samples(tmp_path, items=350, seed=1, tables=["books"])["books"]
    export = manifest.read_export(folder)
    assert [f.item_count for f in export.files] == [0, 100, 100, 100, 50]
