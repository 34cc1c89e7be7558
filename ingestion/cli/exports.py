"""Export commands: ``ingest``, ``sync``, ``export`` and ``detect-schema``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from ingestion.cli import output
from ingestion.cli.arguments import (
    add_export_arguments,
    add_export_folder_arguments,
    add_stream_arguments,
)
from ingestion.cli.merge import merge_tables
from ingestion.cli.streams import report_adoption, stage_stream
from ingestion.dynamodb.tables import TableConfig, TableConfigError, get_table
from ingestion.schema import detect, schema_file
from ingestion.sources import export_control, manifest
from ingestion.spark import progress, spark_config
from ingestion.staging import chain, ledger
from ingestion.staging.exports import detect_table_schema, in_time_order, ingest_export


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ingest",
        help="stage exports (folders .../AWSDynamoDB/<ExportId>) in time order, or stream change files",
    )
    add_export_folder_arguments(p)
    add_stream_arguments(p, required=False)
    p.set_defaults(run=run_ingest)

    p = sub.add_parser(
        "sync",
        help="ingest the exports in time order (or export from DynamoDB first), then merge",
    )
    add_export_folder_arguments(p)
    p.add_argument(
        "--from-dynamodb",
        action="store_true",
        help="export what the ledger lacks first (full export when the ledger is empty)",
    )
    add_export_arguments(p)
    add_stream_arguments(p, required=False)
    p.set_defaults(run=run_sync)

    p = sub.add_parser(
        "export", help="ask DynamoDB for an export (ExportTableToPointInTime), wait, ingest, merge"
    )
    p.add_argument("--table", required=True)
    kind = p.add_mutually_exclusive_group(required=True)
    kind.add_argument("--full", action="store_true", help="a full export as of now")
    kind.add_argument(
        "--incremental",
        action="store_true",
        help="incremental exports from the end of the last applied export up to now",
    )
    p.add_argument("--no-ingest", action="store_true", help="only export, do not ingest")
    add_export_arguments(p)
    p.set_defaults(run=run_export)

    p = sub.add_parser(
        "detect-schema", help="scan every item of a full export and write the schema file"
    )
    p.add_argument("export", metavar="EXPORT_FOLDER")
    p.add_argument("--table", help="a configured table: its keys, and its schema file as output")
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        help="schema file to write (default: "
        "schemas/<table>.json with --table, else standard output)",
    )
    p.set_defaults(run=run_detect_schema)


def ingest_folders(table: TableConfig, sources: list[str], allow_gap: bool = False) -> int:
    """Stage export folders in time order (whatever order they were given in); the summary
    table; 1 on a count mismatch."""
    ordered = in_time_order(sources)
    if ordered != sources:
        print("exports given out of order: staged in time order: " + ", ".join(
            output.short_source(s) for s in ordered
        ), flush=True)  # fmt: skip
        sources = ordered
    spark = spark_config.build_spark(f"ingest {table.name}")
    results = []
    for number, source in enumerate(sources, 1):
        if len(sources) > 1:
            print(f"[{number}/{len(sources)}] {source}", flush=True)
        with progress.progress(spark, f"ingest {table.name} {output.short_source(source)}"):
            results.append(ingest_export(spark, table, source, allow_gap))
    output.print_ingest_results(results)
    for r in results:
        if r.chain_note:
            print(r.chain_note)
        for change in r.schema_changes:
            print(f"{r.table}: {change}")
    drift = [d for r in results for d in r.drift]
    if drift:
        output.print_drift(drift)
        report_adoption(spark, table, drift)
    return 0 if all(r.skipped or r.rows == r.expected for r in results) else 1


def run_ingest(args: argparse.Namespace) -> int:
    table = get_table(args.table)
    if args.stream and args.sources:
        raise TableConfigError("give export folders or --stream, not both")
    if args.stream:
        return stage_stream(table, args)
    if not args.sources:
        raise TableConfigError("nothing to ingest: give export folders, or --stream LOCATION")
    return ingest_folders(table, args.sources, args.allow_gap)


def export_from_dynamodb(
    table: TableConfig, args: argparse.Namespace, kind: str | None
) -> list[str]:
    """Run the DynamoDB exports the ledger calls for; return their folders (s3://...)."""
    table_arn = args.table_arn or table.table_arn
    destination = args.to or table.export_to
    if not table_arn or not destination:
        raise TableConfigError(
            f"table {table.name}: exporting needs its table ARN and an s3:// destination "
            "(table_arn / export_to in dbt_project.yml, or --table-arn / --to)"
        )
    spark = spark_config.build_spark(f"export {table.name}")
    last_end = chain.last_export_end(ledger.entries(spark, table.name))
    folders = export_control.run_exports(
        _dynamodb_client(),
        table_arn,
        destination,
        kind or (manifest.INCREMENTAL if last_end else manifest.FULL),
        last_end,
        args.poll,
        report=lambda line: print(line, flush=True),
    )
    if not folders:
        print(
            f"{table.name}: up to date (less than 15 minutes since {last_end}): nothing to export"
        )
    return folders


def _dynamodb_client() -> Any:
    import boto3

    return boto3.client("dynamodb")


def run_export(args: argparse.Namespace) -> int:
    table = get_table(args.table)
    kind = manifest.FULL if args.full else manifest.INCREMENTAL
    folders = export_from_dynamodb(table, args, kind)
    for folder in folders:
        print(f"exported: {folder}")
    if folders and not args.no_ingest:
        code = ingest_folders(table, folders)
        if code != 0:
            return code
        merge_tables([table])
    return 0


def run_sync(args: argparse.Namespace) -> int:
    table = get_table(args.table)
    if args.stream:
        if args.sources or args.from_dynamodb:
            raise TableConfigError("give --stream, export folders or --from-dynamodb: one of them")
        stage_stream(table, args)
        merge_tables([table])
        return 0
    if args.from_dynamodb:
        if args.sources:
            raise TableConfigError("give export folders or --from-dynamodb, not both")
        args.sources = export_from_dynamodb(table, args, None)
        if not args.sources:
            return 0
    elif not args.sources:
        raise TableConfigError("nothing to sync: give export folders, or --from-dynamodb")
    code = ingest_folders(table, args.sources, args.allow_gap)
    if code != 0:
        return code
    merge_tables([table])
    return 0


def run_detect_schema(args: argparse.Namespace) -> int:
    export = manifest.read_export(args.export)
    table = get_table(args.table) if args.table else None
    started = time.monotonic()
    spark = spark_config.build_spark("detect-schema")
    with progress.progress(spark, f"detect-schema {output.short_source(args.export)}"):
        if table is None:
            detected = detect.detect_unconfigured(spark, export)
        else:
            detected = detect_table_schema(spark, export, table)
    seconds = time.monotonic() - started
    to_stdout = args.output is None and table is None  # the schema itself goes to stdout then
    print(output.schema_table(detected.attributes), file=sys.stderr if to_stdout else sys.stdout)
    for conflict in detected.conflicts:
        print(f"conflict: {conflict}", file=sys.stderr)
    rate = (detected.items or 0) / seconds if seconds else 0.0
    print(
        f"{detected.items} items scanned in {seconds:.1f}s ({rate:,.0f} items/s)", file=sys.stderr
    )
    if to_stdout:
        json.dump(schema_file.to_json(detected), sys.stdout, indent=2, ensure_ascii=False)
        print()
        return 0
    path = schema_file.write_schema(detected, args.output)
    print(f"schema written to {path}")
    return 0
