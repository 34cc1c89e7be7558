"""Argument groups that several commands share, and the table selection they imply."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, TypeVar

from ingestion.dynamodb.tables import TableConfig, get_table, load_tables
from ingestion.jobs.sync import ExportTarget


def add_stream_arguments(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument(
        "--stream",
        required=required,
        metavar="LOCATION",
        help="where the stream's Lambda writes change files (s3://BUCKET/PREFIX or a folder); "
        "the table's files are under LOCATION/<its DynamoDB name>/",
    )
    p.add_argument(
        "--settle",
        type=float,
        default=5.0,
        help="only files older than this many seconds (default 5)",
    )
    p.add_argument(
        "--max-files",
        type=int,
        default=1000,
        help="at most this many change files per commit (default 1000; the rest next time)",
    )
    p.add_argument(
        "--max-rejects",
        type=int,
        default=0,
        help="damaged lines (not JSON, no Keys...) a run may set aside in "
        "staging.<table>_rejects; more fail the run before any commit (default 0)",
    )


def add_table_argument(p: argparse.ArgumentParser) -> None:
    """``--table T``: one configured table, required."""
    p.add_argument(
        "--table", required=True, help="a configured table: its lakehouse name or its DynamoDB name"
    )


def add_entity_rule_arguments(
    p: argparse.ArgumentParser, key_help: str, attribute_help: str
) -> None:
    """A single-table design's rule: ``--entity-key KEY`` or ``--entity-attribute ATTR``."""
    rule = p.add_mutually_exclusive_group()
    rule.add_argument("--entity-key", metavar="KEY", help=key_help)
    rule.add_argument("--entity-attribute", metavar="ATTR", help=attribute_help)


def add_export_folder_arguments(p: argparse.ArgumentParser) -> None:
    add_table_argument(p)
    p.add_argument(
        "sources",
        nargs="*",
        metavar="EXPORT_FOLDER",
        help="export folders (.../AWSDynamoDB/<ExportId>, local or s3://), in any order: "
        "they are staged in time order",
    )
    p.add_argument(
        "--allow-gap", action="store_true", help="accept an export that leaves a gap in the chain"
    )


def add_export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--table-arn", help="the DynamoDB table's ARN (default: table_arn in config)")
    p.add_argument(
        "--to", metavar="s3://BUCKET/PREFIX", help="where DynamoDB writes (default: export_to)"
    )
    p.add_argument(
        "--poll", type=float, default=30.0, help="seconds between DescribeExport calls (30)"
    )


def export_target(args: argparse.Namespace) -> ExportTarget:
    """The ``add_export_arguments`` arguments."""
    return ExportTarget(args.table_arn, args.to, args.poll)


def add_table_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--table", action="append", help="only these tables (default: all)")


def selected_tables(args: argparse.Namespace) -> list[TableConfig]:
    """The tables named with --table, or every configured table."""
    return [get_table(t) for t in args.table] if args.table else list(load_tables().values())


Options = TypeVar("Options")


def options_from(cls: type[Options], args: argparse.Namespace, **given: Any) -> Options:
    """A job's options dataclass filled from the parsed arguments of the same names; ``given``
    sets the fields whose value is not an argument as parsed."""
    assert dataclasses.is_dataclass(cls)
    fields = {f.name for f in dataclasses.fields(cls)} - set(given)
    return cls(**{name: getattr(args, name) for name in fields}, **given)
