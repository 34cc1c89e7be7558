"""Export commands: ``ingest``, ``sync``, ``export`` and ``detect-schema``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ingestion.cli import output
from ingestion.cli.arguments import (
    add_entity_rule_arguments,
    add_export_arguments,
    add_export_folder_arguments,
    add_stream_arguments,
    add_table_argument,
    export_target,
)
from ingestion.dynamodb.tables import TableConfigError, get_table
from ingestion.jobs import stage, sync
from ingestion.jobs.stage import StreamSource
from ingestion.schema import schema_file


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ingest",
        help="stage exports (folders .../AWSDynamoDB/<ExportId>) in time order, or stream change "
        "files",
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
    p.add_argument(
        "--heal",
        action="store_true",
        help="with --from-dynamodb: when no incremental export can continue the chain (beyond "
        "point-in-time recovery), take a full export and stage it as a re-baseline (the "
        "table's heal: true does the same)",
    )
    add_export_arguments(p)
    add_stream_arguments(p, required=False)
    p.set_defaults(run=run_sync)

    p = sub.add_parser(
        "export", help="ask DynamoDB for an export (ExportTableToPointInTime), wait, ingest, merge"
    )
    add_table_argument(p)
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
    p.add_argument(
        "export",
        metavar="EXPORT_FOLDER",
        help="a full export's folder (.../AWSDynamoDB/<ExportId>)",
    )
    p.add_argument("--table", help="a configured table: its keys, and its schema file as output")
    add_entity_rule_arguments(  # a single-table design's entity values counted
        p,
        "count the items of each entity value: the text before the first '#' of this key, all "
        "of it without one (a single-table design; default: the table's rule)",
        "count the items of each entity value: this attribute's value",
    )
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        help="schema file to write (default: "
        "schemas/<table>.json with --table, else standard output)",
    )
    p.set_defaults(run=run_detect_schema)


def stream_source(args: argparse.Namespace) -> StreamSource | None:
    """The ``--stream`` arguments (``add_stream_arguments``), or None without ``--stream``."""
    if not args.stream:
        return None
    return StreamSource(args.stream, args.settle, args.max_files, args.max_rejects)


def run_ingest(args: argparse.Namespace) -> int:
    table = get_table(args.table)
    stream = stream_source(args)
    if stream and args.sources:
        raise TableConfigError("give export folders or --stream, not both")
    if stream:
        stage.stage_stream(table, stream, output.Console())
        return 0
    if not args.sources:
        raise TableConfigError("nothing to ingest: give export folders, or --stream LOCATION")
    staged = stage.stage_exports(table, args.sources, output.Console(), args.allow_gap)
    return 0 if staged.complete else 1


def run_export(args: argparse.Namespace) -> int:
    done = sync.export(
        get_table(args.table), export_target(args), args.full, not args.no_ingest, output.Console()
    )
    return 0 if done else 1


def run_sync(args: argparse.Namespace) -> int:
    if args.heal and not args.from_dynamodb:
        raise TableConfigError("--heal takes a full export from DynamoDB: add --from-dynamodb")
    done = sync.sync(
        get_table(args.table),
        output.Console(),
        folders=args.sources,
        stream=stream_source(args),
        target=export_target(args) if args.from_dynamodb else None,
        allow_gap=args.allow_gap,
        heal=args.heal,
    )
    return 0 if done else 1


def run_detect_schema(args: argparse.Namespace) -> int:
    table = get_table(args.table) if args.table else None
    by = ("key", args.entity_key) if args.entity_key else None
    by = ("attribute", args.entity_attribute) if args.entity_attribute else by
    found = stage.detect_schema(args.export, table, args.output, by)
    detected, seconds = found.schema, found.seconds
    shown_on = sys.stderr if found.written is None else sys.stdout  # stdout: the schema itself
    print(output.schema_table(detected.attributes), file=shown_on)
    for section in detected.entities:
        print(f"entity table {section.table}:", file=shown_on)
        print(output.schema_table(section.attributes), file=shown_on)
    if found.values is not None:
        print(output.entity_values(found.values, table), file=shown_on)
    for conflict in detected.conflicts:
        print(f"conflict: {conflict}", file=sys.stderr)
    rate = (detected.items or 0) / seconds if seconds else 0.0
    print(
        f"{detected.items} items scanned in {seconds:.1f}s ({rate:,.0f} items/s)", file=sys.stderr
    )
    if found.written is None:
        json.dump(schema_file.to_json(detected), sys.stdout, indent=2, ensure_ascii=False)
        print()
    else:
        print(f"schema written to {found.written}")
    return 0
