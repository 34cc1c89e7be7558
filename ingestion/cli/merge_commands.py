"""Commands that build the final tables and show their types: ``merge``, ``rebuild``,
``drift`` and ``schema``."""

from __future__ import annotations

import argparse
import json
import sys

from ingestion.cli import output
from ingestion.cli.arguments import add_table_argument, add_table_selection, selected_tables
from ingestion.dynamodb.tables import get_table
from ingestion.jobs import apply, inspection
from ingestion.schema import schema_file


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("merge", help="dbt run + dbt test, with a report of the changes")
    add_table_selection(p)
    p.add_argument(
        "--full-check",
        action="store_true",
        help="test whole final tables against their change logs (default: the keys the merged "
        "batches touched)",
    )
    p.set_defaults(run=run_merge_command)

    p = sub.add_parser(
        "rebuild", help="re-detect types from the staged images, rebuild staging and final table"
    )
    add_table_argument(p)
    p.set_defaults(run=run_rebuild)

    p = sub.add_parser("drift", help="values staged that did not fit their column, per attribute")
    add_table_argument(p)
    p.set_defaults(run=run_drift)

    p = sub.add_parser(
        "schema",
        help="print the table's types as the jobs read them (kept with its staging table), "
        "as JSON in the schema file's format, for a person to read and diff",
    )
    p.add_argument("--table", required=True, help="a configured table's name")
    p.set_defaults(run=run_schema)


def run_merge_command(args: argparse.Namespace) -> int:
    apply.merge_tables(selected_tables(args), output.Console(), full_check=args.full_check)
    return 0


def run_rebuild(args: argparse.Namespace) -> int:
    apply.rebuild_table(get_table(args.table), output.Console())
    return 0


def run_drift(args: argparse.Namespace) -> int:
    table = get_table(args.table)
    found = inspection.drift(table)
    if not found:
        print(f"{table.name}: no schema drift: every staged value fits its column")
        return 0
    output.print_drift(found)
    print(f"to adopt the new types: ddb-lakehouse rebuild --table {table.name}")
    return 0


def run_schema(args: argparse.Namespace) -> int:
    table = get_table(args.table)
    schema, where = inspection.table_schema(table)
    print(f"{table.name}: types {where}", file=sys.stderr)
    if schema is not None:
        print(json.dumps(schema_file.to_json(schema), indent=2, ensure_ascii=False))
    return 0
