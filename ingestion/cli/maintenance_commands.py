"""``maintain``: compaction, the ledger carried forward, snapshot expiry, orphan files."""

from __future__ import annotations

import argparse
from datetime import timedelta

from ingestion.cli import output
from ingestion.cli.arguments import add_table_selection, selected_tables
from ingestion.maintenance.compaction import maintain_tables


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "maintain",
        help="compact, carry the ledger forward, expire old snapshots, remove old orphan files",
    )
    add_table_selection(p)
    p.add_argument(
        "--retention-hours",
        type=float,
        default=24.0,
        help="keep every snapshot younger than this (default 24; longer than your longest query)",
    )
    p.add_argument(
        "--keep-snapshots", type=int, default=5, help="and at least this many (default 5)"
    )
    p.add_argument(
        "--no-check",
        action="store_true",
        help="skip the full data tests (dbt test of whole tables) that end a maintain",
    )
    p.set_defaults(run=run_maintain)


def run_maintain(args: argparse.Namespace) -> int:
    maintain_tables(
        selected_tables(args),
        timedelta(hours=args.retention_hours),
        args.keep_snapshots,
        output.Console().line,
        check=not args.no_check,
    )
    return 0
