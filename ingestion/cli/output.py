"""Human-readable output: result tables and run summaries."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any, TextIO

from pyspark.sql import Row

from ingestion.config import names
from ingestion.jobs.stage import short_source


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, list | tuple | dict):  # structs (Rows), arrays, maps: as JSON
        return _json_text(value)
    return str(value)


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    rule = "+-" + "-+-".join("-" * w for w in widths) + "-+"
    return "\n".join([rule, line(list(headers)), rule, *(line(r) for r in cells), rule])


def _json_value(value: Any) -> Any:
    """A Spark value as JSON: a struct (a ``Row``, which is a tuple) keeps its field names,
    decimals keep their digits (as text), binary is hex, nested values are converted too."""
    if isinstance(value, Row):
        return {k: _json_value(v) for k, v in value.asDict(recursive=False).items()}
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(_json_value(k)): _json_value(v) for k, v in value.items()}
    return value


def _json_text(value: Any) -> str:
    return json.dumps(_json_value(value), ensure_ascii=False)


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, list | tuple | dict):
        return _json_text(value)
    return _json_value(value)


def write_rows(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], fmt: str, out: TextIO | None = None
) -> int:
    """Write rows as table, csv or json (one object per line) to ``out`` (default: the current
    standard output, looked up at call time); return the row count."""
    out = out or sys.stdout
    count = 0
    if fmt == "table":
        materialized = list(rows)
        out.write(format_table(headers, materialized) + "\n")
        return len(materialized)
    if fmt == "csv":
        writer = csv.writer(out)
        writer.writerow(headers)
        for row in rows:
            writer.writerow([_csv_cell(v) for v in row])
            count += 1
        return count
    for row in rows:
        out.write(json.dumps({h: _json_value(v) for h, v in zip(headers, row, strict=True)}) + "\n")
        count += 1
    return count


def print_ingest_results(results: Sequence[Any]) -> None:
    """One row per ingested export (``staging.exports.IngestResult``)."""
    print(
        format_table(
            ["table", "source", "staged rows", "manifest items", "status", "seconds"],
            [
                [
                    r.table,
                    short_source(r.source),
                    r.rows,
                    r.expected,
                    "already ingested"
                    if r.skipped
                    else ("ok" if r.rows == r.expected else "MISMATCH"),
                    f"{r.seconds:.1f}",
                ]
                for r in results
            ],
        )
    )


def print_drift(drift: Sequence[Any]) -> None:
    """Values that did not fit their column (``staging.drift.Drift``), per attribute and source."""
    print("schema drift (values that do not fit their column):")
    print(
        format_table(
            ["attribute", "source", "rows", "example value"],
            [[d.attribute, short_source(d.source), d.rows, d.example[:80]] for d in drift],
        )
    )


def print_merge(counts: Sequence[Any], seconds: float) -> None:
    """What a merge changed per final table (``merge.merge_counts.MergeCounts``)."""
    print(
        format_table(
            ["final table", "rows", "inserted", "updated", "deleted"],
            [
                [f"{names.FINAL}.{c.table}", c.rows, c.inserted, c.updated, c.deleted]
                for c in counts
            ],
        )
    )
    print(f"merge (dbt run + dbt test): {seconds:.1f}s")


def entity_values(values: dict[str | None, int], table: Any) -> str:
    """A single-table design's entity values found, with their items and the final table each
    goes to under the table's rule (``-`` without one): what a rule's ``values`` are written
    from."""
    rule = table.entities if table is not None else None
    listed = dict(rule.values) if rule else {}

    def goes_to(value: str | None) -> str:
        if rule is None:
            return "-"
        return listed.get(value or "", "") or f"{rule.unmatched} (not listed)"

    ordered = sorted(values.items(), key=lambda v: (v[0] is None, -v[1], v[0] or ""))
    return format_table(
        ["entity value", "items", "final table"],
        [
            [value if value is not None else "(none)", count, goes_to(value)]
            for value, count in ordered
        ],
    )


def schema_table(attributes: Sequence[Any]) -> str:
    """A detected schema (``schema.types.Attribute``) as a table: column, type, what was seen."""

    def short(text: str) -> str:
        return text if len(text) <= 60 else text[:57] + "..."

    return format_table(
        ["attribute", "column", "type", "dynamodb types", "note"],
        [
            [
                a.name,
                a.column,
                short(a.type.sql()),
                ", ".join(f"{t} {n}" for t, n in a.info.get("dynamodb_types", {}).items()),
                ("key" if a.key else "") + a.info.get("note", ""),
            ]
            for a in attributes
        ],
    )


class Console:
    """The ``jobs.reporter.Reporter`` of the command line: every report printed as it comes."""

    def line(self, text: str) -> None:
        print(text, flush=True)

    def ingested(self, results: Sequence[Any]) -> None:
        print_ingest_results(results)

    def drift(self, drift: Sequence[Any]) -> None:
        print_drift(drift)

    def merged(self, counts: Sequence[Any], seconds: float) -> None:
        print_merge(counts, seconds)
