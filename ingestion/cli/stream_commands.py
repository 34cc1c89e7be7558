"""``watch``: tables kept fresh from their stream change files (``jobs.watch``)."""

from __future__ import annotations

import argparse
from datetime import timedelta

from ingestion.cli import output
from ingestion.cli.arguments import add_stream_arguments, options_from
from ingestion.dynamodb.tables import get_table
from ingestion.jobs.watch import WatchOptions, watch_tables
from ingestion.maintenance.compaction import EXPIRY_EVERY


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "watch",
        help="every --interval seconds: ingest new stream change files and merge (one Spark "
        "session)",
    )
    p.add_argument(
        "--table",
        required=True,
        action="append",
        help="a configured table: its lakehouse name or its DynamoDB name; repeat it to watch "
        "several tables in one process (one Spark session, one merge a tick)",
    )
    add_stream_arguments(p, required=True)
    p.add_argument(
        "--interval", type=float, default=60.0, help="seconds between ticks (default 60)"
    )
    p.add_argument(
        "--ticks", type=int, help="stop after this many ticks (default: run until stopped)"
    )
    p.add_argument(
        "--test-every",
        type=int,
        default=10,
        help="run `dbt test` every N ticks that merged something (default 10; 1 = every tick)",
    )
    p.add_argument(
        "--maintain-every",
        type=int,
        default=60,
        help="compact the final table every N ticks (default 60; 0 = never); the rest of "
        "`maintain` (retention, expiry) on such a tick when an hour has passed since the last",
    )
    p.add_argument(
        "--check-every",
        type=_hours,
        default=_hours("24"),
        metavar="HOURS",
        help="test each table whole every HOURS (default 24, the first that long after the "
        "start; 0 = never): a tick's tests look only at the rows its merges wrote",
    )
    p.add_argument(
        "--max-failures",
        type=int,
        default=5,
        help="stop after this many failed ticks in a row (default 5)",
    )
    p.add_argument(
        "--if-free",
        action="store_true",
        help="when another watch holds the table, say so and exit 0 (for a schedule that "
        "keeps one watch running: its runs then never fail, nor get retried, for that)",
    )
    p.set_defaults(run=run_watch)


def _hours(text: str) -> timedelta | None:
    """``--check-every``: hours as a period, None for 0 (never)."""
    try:
        hours = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of hours: {text!r}") from None
    if hours < 0:
        raise argparse.ArgumentTypeError(f"a negative period: {text!r}")
    return timedelta(hours=hours) if hours else None


def run_watch(args: argparse.Namespace) -> int:
    # No flags for these: the expiry after compaction is due hourly (compaction.EXPIRY_EVERY),
    # and dbt's artifacts are not rewritten on every tick.
    options = options_from(WatchOptions, args, expiry_every=EXPIRY_EVERY, dbt_artifacts=False)
    tables = list({t.name: t for t in map(get_table, args.table)}.values())  # each once
    watch_tables(tables, options, output.Console().line, if_free=args.if_free)
    return 0
