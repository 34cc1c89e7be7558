"""The project as a benchmark reaches it: its commands, run in this process, and their printed
tables read back.

A benchmark measures what a user runs, so it reaches the project only through its public entry
points (tests/bench/test_bench_entry_points.py holds every benchmark to the list):

- the commands (``ingestion.cli.main``, here in-process so that a warm Spark session is shared,
  or ``python -m ingestion.cli`` as a process where the JVM's start is part of the figure);
- the producers of the inputs a user's AWS account writes: the samples in AWS's exact layout
  (``ingestion.samples``) and the change files of the project's Lambda function
  (``ingestion.sources.change_file_writer``, the module ``ingestion.stream_writer`` deploys);
- Spark built with the project's configuration (``ingestion.spark.spark_config.build_spark``), to
  run a floor and to read the lakehouse's tables and their Iceberg metadata tables, as a user's
  own Spark job would.

What a command reports comes from what it prints (its tables), not from its functions' return
values: a figure never depends on an internal that a user cannot see.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
from datetime import datetime
from pathlib import Path
from typing import Any


class CommandFailed(RuntimeError):
    pass


def cli(*args: str, echo: bool = True, stderr: bool = False) -> str:
    """``ddb-lakehouse <args>`` in this process; its standard output (also echoed when ``echo``),
    and its standard error after it when ``stderr``. A command that exits non-zero raises, with
    what it printed."""
    from ingestion.cli import main

    if not logging.root.handlers:  # the CLI's logging bound to the real stderr, never a capture
        logging.basicConfig(
            level=logging.WARNING,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
            datefmt="%H:%M:%S",
        )
    out = io.StringIO()
    with contextlib.redirect_stdout(out), _errors_to(out if stderr else None):
        status = main(list(args))
    text = out.getvalue()
    if echo:
        sys.stdout.write(text)
        sys.stdout.flush()
    if status != 0:
        raise CommandFailed(f"ddb-lakehouse {' '.join(args)}: exit {status}\n{text}")
    return text


def _errors_to(sink: io.StringIO | None) -> contextlib.AbstractContextManager[object]:
    return contextlib.redirect_stderr(sink) if sink is not None else contextlib.nullcontext()


def printed_tables(text: str) -> list[list[dict[str, str]]]:
    """Every table a command printed (a ``+---+`` rule, the ``| a | b |`` header, a rule, its
    rows, a rule: ``ingestion.cli.output.format_table``'s shape), each as its rows keyed by the
    header's cells."""
    lines = text.splitlines()
    found: list[list[dict[str, str]]] = []
    i = 0
    while i + 2 < len(lines):
        rule, header, under = lines[i : i + 3]
        if not (rule.startswith("+-") and header.startswith("| ") and under == rule):
            i += 1
            continue
        names = _cells(header)
        rows, i = [], i + 3
        while i < len(lines) and lines[i].startswith("| "):
            rows.append(dict(zip(names, _cells(lines[i]), strict=True)))
            i += 1
        found.append(rows)
    return found


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip()[1:-1].split(" | ")]


def table_with(text: str, header: str) -> list[dict[str, str]]:
    """The rows of the one printed table with a column ``header``."""
    tables = [t for t in printed_tables(text) if t and header in t[0]]
    if len(tables) != 1:
        raise CommandFailed(f"expected one printed table with {header!r}, found {len(tables)}")
    return tables[0]


def merged(text: str, table: str) -> dict[str, int]:
    """What ``merge`` (or ``sync``) printed for ``lakehouse.<table>``: rows, inserted, updated,
    deleted."""
    for row in table_with(text, "inserted"):
        if row["final table"] == f"lakehouse.{table}":
            return {k: int(row[k]) for k in ("rows", "inserted", "updated", "deleted")}
    raise CommandFailed(f"no merge row for lakehouse.{table}")


def staged_rows(text: str) -> int:
    """The rows ``ingest`` printed as staged, over every source it staged."""
    return sum(int(row["staged rows"]) for row in table_with(text, "staged rows"))


def live_files(spark: Any, name: str) -> tuple[int, int]:
    """(data files, delete files) of a table's current snapshot, from its ``files`` table."""
    rows = spark.sql(f"select content, count(*) as n from {name}.files group by content")
    counts = {r["content"]: int(r["n"]) for r in rows.collect()}
    return counts.get(0, 0), counts.get(1, 0) + counts.get(2, 0)


def metadata_bytes(spark: Any, name: str) -> int:
    """Bytes of a table's current metadata: its metadata file, manifest list and manifests (what
    every query and commit reads first), from its metadata tables and Hadoop's file system."""
    current = spark.sql(
        f"select file from {name}.metadata_log_entries order by timestamp desc limit 1"
    ).first()
    snapshot = spark.sql(
        f"select manifest_list from {name}.snapshots order by committed_at desc limit 1"
    ).first()
    files = [current["file"]] if current else []
    if snapshot and snapshot["manifest_list"]:
        files.append(snapshot["manifest_list"])
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    size = 0
    for file in files:
        path = jvm.org.apache.hadoop.fs.Path(file)
        size += path.getFileSystem(conf).getFileStatus(path).getLen()
    manifests = spark.sql(f"select sum(length) from {name}.manifests").first()[0]
    return size + int(manifests or 0)


def export_data_files(folder: Path) -> list[str]:
    """An export's data files, as its ``manifest-files.json`` lists them (one JSON object a line;
    ``dataFileS3Key`` is the key in the bucket: ``<prefix>/AWSDynamoDB/<ExportId>/data/<file>`` for
    a full export, ``<prefix>/AWSDynamoDB/data/<file>`` for an incremental one, whose files share
    one folder: AWS's layout, docs/exports-and-the-ledger.md). ``folder`` is
    ``.../AWSDynamoDB/<ExportId>``."""
    lines = (folder / "manifest-files.json").read_text().splitlines()
    keys = [json.loads(line)["dataFileS3Key"] for line in lines if line.strip()]
    return [str(folder.parent / key.split("/AWSDynamoDB/", 1)[1]) for key in keys]


def export_time(folder: Path) -> datetime:
    """An export's point in time: ``exportTime`` of its ``manifest-summary.json``."""
    summary = json.loads((folder / "manifest-summary.json").read_text())
    return datetime.fromisoformat(summary["exportTime"].replace("Z", "+00:00"))
