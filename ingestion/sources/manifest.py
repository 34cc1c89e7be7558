"""Read a DynamoDB export through its manifests: what the export is and which files hold its data.

Data files are taken from ``manifest-files.json``, never from a glob of ``data/``: incremental
exports share one ``AWSDynamoDB/data/`` folder. Every file's MD5 is checked against the manifest
before anything is staged.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ingestion.config import clock
from ingestion.config.errors import LakehouseError
from ingestion.sources.locations import S3Path

Location = Path | S3Path  # a local path, or an s3:// one (manifests read with boto3)

FULL = "FULL_EXPORT"
INCREMENTAL = "INCREMENTAL_EXPORT"


@dataclass(frozen=True)
class Window:
    """A span of time an incremental export covers: ``[start, end)``."""

    start: datetime
    end: datetime


class ExportError(LakehouseError):
    """The export is unreadable or inconsistent; nothing of it may be staged."""


@dataclass(frozen=True)
class DataFile:
    path: Location
    item_count: int
    md5: str  # base64, as in the manifest


@dataclass(frozen=True)
class Export:
    folder: Location
    export_arn: str
    table_arn: str
    export_type: str  # FULL_EXPORT | INCREMENTAL_EXPORT
    output_view: str | None  # NEW_AND_OLD_IMAGES | NEW_IMAGE (incremental only)
    export_time: datetime | None  # full exports
    export_from_time: datetime | None  # incremental exports
    export_to_time: datetime | None
    item_count: int
    files: tuple[DataFile, ...]

    @property
    def export_id(self) -> str:
        return self.folder.name

    @property
    def table_name(self) -> str:
        """The DynamoDB table's name, from its ARN (``...:table/<name>``)."""
        return self.table_arn.rsplit("table/", 1)[-1].split("/", 1)[0]

    @property
    def version_micros(self) -> int:
        """The version of the export's rows, in microseconds: a full export's time; for an
        incremental export the last microsecond of its window (``exportToTime`` is exclusive),
        because each of its lines is the item's state at the end of the window (AWS compacts a
        window to each item's last write), whatever the line's ``WriteTimestampMicros``."""
        if self.export_time is not None:
            return clock.epoch_micros(self.export_time)
        assert self.export_to_time is not None
        return clock.epoch_micros(self.export_to_time) - 1


def _parse_time(value: Any, field: str, where: Location) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError as exc:
        raise ExportError(f"{where}: {field} is not an ISO-8601 time: {value!r}") from exc


def _read_json(path: Location) -> dict[str, Any]:
    if not path.is_file():
        raise ExportError(
            f"{path} is missing: is this a DynamoDB export folder that has completed?"
        )
    try:
        value = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ExportError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ExportError(f"{path} must hold one JSON object")
    return value


EXPORT_FOLDER = ".../AWSDynamoDB/<ExportId>"


def exports_under(folder: Path) -> list[Path]:
    """The export folders (those with a manifest-summary.json) in ``folder``, in
    ``folder/AWSDynamoDB`` or ``folder/<table>/AWSDynamoDB``, sorted by name (the name starts
    with the export's time)."""
    found = [
        summary.parent
        for pattern in (
            "*/manifest-summary.json",
            "AWSDynamoDB/*/manifest-summary.json",
            "*/AWSDynamoDB/*/manifest-summary.json",
        )
        for summary in folder.glob(pattern)
    ]
    return sorted(set(found), key=lambda p: (p.name, str(p)))


def _check_folder(root: Location) -> None:
    """What was given instead of an export folder, said with what to pass: a manifest file, a
    path that does not exist, a folder that holds exports (a parent ``AWSDynamoDB``)."""
    if root.name in ("manifest-summary.json", "manifest-files.json") or str(root).endswith(
        (".json", ".md5", ".json.gz")
    ):
        raise ExportError(
            f"{root} is a file of an export: give the export folder that holds it "
            f"({root.parent}), not the file"
        )
    if not isinstance(root, Path):
        return  # s3://: a missing manifest says so when it is read
    if not root.exists():
        raise ExportError(f"{root} does not exist: give an export folder ({EXPORT_FOLDER})")
    if not root.is_dir():
        raise ExportError(f"{root} is a file: give an export folder ({EXPORT_FOLDER})")
    if (root / "manifest-summary.json").is_file():
        return
    # Decision: a folder holding exports is not taken as "all of them": which exports a table
    # applies is the person's choice (another table's, or an abandoned one, may sit beside
    # them), so they are listed to pass; given together they are staged in time order.
    found = exports_under(root)
    if found:
        shown = " ".join(str(f) for f in found[:10]) + (" ..." if len(found) > 10 else "")
        raise ExportError(
            f"{root} holds {len(found)} export folder(s), not an export: give the ones to "
            f"stage (any order: they are staged in time order): {shown}"
        )
    raise ExportError(
        f"{root}/manifest-summary.json is missing: {root} is not a DynamoDB export folder "
        f"({EXPORT_FOLDER}), or its export has not completed"
    )


def _data_path(folder: Location, key: str) -> Location:
    """Where a manifest's ``dataFileS3Key`` is, relative to the export folder given, wherever it
    was copied to: ``.../AWSDynamoDB/<ExportId>/data/<file>`` (a full export) is
    ``<folder>/data/<file>``; ``.../AWSDynamoDB/data/<file>`` (an incremental one, in the folder
    every incremental export under one prefix shares) is ``<folder>/../data/<file>``. Only the
    key's last parts count: the bucket, the prefix and the folder's own name may differ."""
    parts = key.split("/")
    if len(parts) >= 3 and parts[-2] == "data" and parts[-3] == "AWSDynamoDB":
        return folder.parent / "data" / parts[-1]
    if len(parts) >= 4 and parts[-2] == "data" and parts[-4] == "AWSDynamoDB":
        return folder / "data" / parts[-1]
    raise ExportError(
        f"{folder}: dataFileS3Key {key!r} is not in AWS's layout (.../AWSDynamoDB/<ExportId>/"
        "data/<file> for a full export, .../AWSDynamoDB/data/<file> for an incremental one)"
    )


def _read_files(folder: Location) -> list[DataFile]:
    path = folder / "manifest-files.json"
    if not path.is_file():
        raise ExportError(f"{path} is missing: the export is incomplete")
    files = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            files.append(
                DataFile(
                    path=_data_path(folder, entry["dataFileS3Key"]),
                    item_count=int(entry["itemCount"]),
                    md5=str(entry["md5Checksum"]),
                )
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ExportError(
                f"{path}:{number}: invalid manifest line ({exc}): {line[:200]}"
            ) from exc
    return files


def md5_base64(path: Location) -> str:
    digest = hashlib.md5()  # noqa: S324 - the manifest's checksum, not a security use
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return base64.b64encode(digest.digest()).decode()


def line_count(path: Path) -> int:
    """The lines of a gzip data file as Spark's text source counts them (Hadoop's line reader:
    a line ends at ``\n``, ``\r`` or ``\r\n``; a last line without an end counts; gzip
    members one after another read as one stream). Raises ``zlib.error`` on a damaged stream,
    ``EOFError`` on one cut short."""
    lines, last, started = 0, b"", False
    inflater = zlib.decompressobj(wbits=31)
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            started = True
            while block:
                if inflater.eof:  # another gzip member follows the last one
                    inflater = zlib.decompressobj(wbits=31)
                text = inflater.decompress(block)
                if text:
                    lines += text.count(b"\n")
                    if b"\r" in text:  # DynamoDB writes none: a line end of another system
                        lines += text.count(b"\r") - text.count(b"\r\n")
                    if last == b"\r" and text.startswith(b"\n"):
                        lines -= 1  # a \r\n split between two pieces is one end, not two
                    last = text[-1:]
                block = inflater.unused_data
    if started and not inflater.eof:
        raise EOFError("the gzip stream ends before its end marker (the file is cut short)")
    return lines + (1 if last not in (b"", b"\n", b"\r") else 0)


def verify_manifest(folder: Location) -> None:
    """``manifest-files.md5`` (real exports write it: the base64 MD5 of manifest-files.json)
    must match when it is there: a damaged list of files is refused before it is trusted."""
    checksum = folder / "manifest-files.md5"
    if not checksum.is_file():
        return
    expected = checksum.read_text().strip()
    actual = md5_base64(folder / "manifest-files.json")
    if actual != expected:
        raise ExportError(
            f"{folder / 'manifest-files.json'}: MD5 {actual} differs from manifest-files.md5's "
            f"{expected} (the list of data files is damaged or was edited)"
        )


def verify_files(export: Export) -> None:
    """Every listed file exists and matches its MD5; raise on the first that does not."""
    for data_file in export.files:
        if not data_file.path.is_file():
            where = (
                f"{export.folder}/data/ (a full export keeps its data files in its own folder)"
                if export.export_type == FULL
                else f"{export.folder.parent}/data/ (an incremental export's data files are in "
                "the AWSDynamoDB/data/ folder beside its export folder: copy that folder too)"
            )
            raise ExportError(
                f"{data_file.path}: listed in the manifest but missing; looked in {where}"
            )
        actual = md5_base64(data_file.path)
        if actual != data_file.md5:
            raise ExportError(
                f"{data_file.path}: MD5 {actual} differs from the manifest's {data_file.md5} "
                "(the file is damaged or was replaced)"
            )


def read_export(folder: str | Path, verify: bool = True) -> Export:
    """The export in ``folder`` (``.../AWSDynamoDB/<ExportId>``, local or ``s3://``), checked
    against its manifests. On ``s3://`` every data file is read once here for its MD5 (boto3),
    and once more by Spark."""
    text = str(folder).rstrip("/")
    root: Location
    if text.startswith("s3://"):
        root = S3Path.parse(text)
    elif "://" in text:
        raise ExportError(f"{folder}: an export folder is a local path or s3://BUCKET/PREFIX")
    else:
        root = Path(folder).resolve()
    _check_folder(root)
    summary_path = root / "manifest-summary.json"
    summary = _read_json(summary_path)
    export_type = summary.get("exportType") or FULL
    if export_type not in (FULL, INCREMENTAL):
        raise ExportError(f"{summary_path}: unknown exportType {export_type!r}")
    if summary.get("outputFormat", "DYNAMODB_JSON") != "DYNAMODB_JSON":
        raise ExportError(
            f"{summary_path}: outputFormat {summary.get('outputFormat')!r} is not supported (use "
            f"DYNAMODB_JSON)"
        )
    for required in ("exportArn", "tableArn", "itemCount"):
        if required not in summary:
            raise ExportError(f"{summary_path}: {required} is missing")
    export = Export(
        folder=root,
        export_arn=str(summary["exportArn"]),
        table_arn=str(summary["tableArn"]),
        export_type=export_type,
        output_view=summary.get("outputView"),
        export_time=_parse_time(summary.get("exportTime"), "exportTime", summary_path),
        export_from_time=_parse_time(summary.get("exportFromTime"), "exportFromTime", summary_path),
        export_to_time=_parse_time(summary.get("exportToTime"), "exportToTime", summary_path),
        item_count=int(summary["itemCount"]),
        files=tuple(_read_files(root)),
    )
    if export_type == FULL and export.export_time is None:
        raise ExportError(f"{summary_path}: a full export needs exportTime")
    listed = sum(f.item_count for f in export.files)
    if listed != export.item_count:
        raise ExportError(
            f"{root}: manifest-files.json lists {listed} items, manifest-summary.json says "
            f"{export.item_count}"
        )
    if verify:
        verify_manifest(root)
        verify_files(export)
    return export
