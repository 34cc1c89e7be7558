"""Reading exports through their manifests, and refusing damaged ones (no Spark needed)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from ingestion.samples import sample_exports
from ingestion.sources import manifest


@pytest.fixture
def export(tmp_path: Path) -> Path:
    return sample_exports.write_samples(tmp_path, items=30, seed=3, tables=["books"])["books"]


def test_reads_summary_and_files(export: Path) -> None:
    result = manifest.read_export(export)
    assert result.export_type == manifest.FULL
    assert result.item_count == 30
    assert result.table_arn.endswith(":table/books")
    assert result.files[0].item_count == 0  # the empty partition, listed first
    assert sum(f.item_count for f in result.files) == 30
    assert all(f.path.is_file() for f in result.files)
    assert result.version_micros == int(result.export_time.timestamp() * 1_000_000)


def _first_data_file(export: Path) -> Path:
    entry = json.loads((export / "manifest-files.json").read_text().splitlines()[1])
    return export.parent.parent / entry["dataFileS3Key"].split("/", 2)[2]


def test_md5_mismatch_is_refused_naming_the_file(export: Path) -> None:
    data = _first_data_file(export)
    lines = gzip.decompress(data.read_bytes()) + b'{"Item":{"id":{"S":"intruder"}}}\n'
    data.write_bytes(gzip.compress(lines))
    with pytest.raises(manifest.ExportError, match=f"{data.name}: MD5 .* differs"):
        manifest.read_export(export)


def test_missing_data_file_is_refused(export: Path) -> None:
    data = _first_data_file(export)
    data.unlink()
    with pytest.raises(
        manifest.ExportError, match=f"{data.name}: listed in the manifest but missing"
    ):
        manifest.read_export(export)


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"exportArn": "x"}'])
def test_invalid_summary_is_refused(export: Path, content: str) -> None:
    (export / "manifest-summary.json").write_text(content)
    with pytest.raises(manifest.ExportError, match="manifest-summary.json"):
        manifest.read_export(export)


def test_missing_summary_means_incomplete(export: Path) -> None:
    (export / "manifest-summary.json").unlink()
    with pytest.raises(manifest.ExportError, match="is missing"):
        manifest.read_export(export)


def test_item_counts_must_agree_between_manifests(export: Path) -> None:
    summary = json.loads((export / "manifest-summary.json").read_text())
    summary["itemCount"] = 31
    (export / "manifest-summary.json").write_text(json.dumps(summary))
    with pytest.raises(manifest.ExportError, match="lists 30 items, manifest-summary.json says 31"):
        manifest.read_export(export)


def test_export_can_be_moved(export: Path, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere" / "AWSDynamoDB" / export.name
    shutil.copytree(export, moved)
    assert manifest.read_export(moved).item_count == 30


def test_a_damaged_list_of_files_is_refused_by_its_md5(export: Path) -> None:
    listing = export / "manifest-files.json"
    lines = listing.read_text().splitlines()
    listing.write_text("\n".join(lines[1:]) + "\n")  # one file fewer, counts adjusted below
    summary = json.loads((export / "manifest-summary.json").read_text())
    summary["itemCount"] -= json.loads(lines[0])["itemCount"]
    (export / "manifest-summary.json").write_text(json.dumps(summary))
    with pytest.raises(
        manifest.ExportError, match="manifest-files.json: MD5 .* manifest-files.md5"
    ):
        manifest.read_export(export)
    (export / "manifest-files.md5").unlink()  # an export without it is read all the same
    assert manifest.read_export(export).item_count == summary["itemCount"]


def test_a_prefix_that_itself_holds_awsdynamodb(export: Path, tmp_path: Path) -> None:
    """s3Prefix "backups/AWSDynamoDB/daily": the data files were looked up from the first
    AWSDynamoDB/ of the key, inside the prefix, and not found."""
    prefix = "backups/AWSDynamoDB/daily"
    summary = json.loads((export / "manifest-summary.json").read_text())
    old_prefix, summary["s3Prefix"] = summary["s3Prefix"], prefix
    (export / "manifest-summary.json").write_text(json.dumps(summary))
    listing = export / "manifest-files.json"
    listing.write_text(listing.read_text().replace(f'"{old_prefix}/', f'"{prefix}/'))
    (export / "manifest-files.md5").write_text(manifest.md5_base64(listing))
    result = manifest.read_export(export)
    assert all(f.path.is_file() for f in result.files)
    assert sum(f.item_count for f in result.files) == 30
