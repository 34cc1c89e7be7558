"""Commands that look without changing anything: ``status``, ``query`` and ``verify``."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from ingestion.catalog import ledger
from ingestion.cli import output
from ingestion.cli.arguments import (
    add_export_arguments,
    add_table_argument,
    add_table_selection,
    export_target,
    selected_tables,
)
from ingestion.config import names
from ingestion.dynamodb.tables import TableConfigError, get_table
from ingestion.jobs import as_of, sync
from ingestion.jobs.inspection import (
    ENGINES,
    METRICS_NAMESPACE,
    publish_metrics,
    query,
    statuses,
    verify,
)
from ingestion.maintenance import verify as verifying
from ingestion.maintenance.status import TableStatus
from ingestion.sources.export_control import VERIFY_PREFIX

STREAM_BATCHES_SHOWN = 5  # a watched table has one per tick: the last few are enough


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "status", help="per table: the ledger, last applied time, unmerged rows, final rows"
    )
    add_table_selection(p)
    p.set_defaults(run=run_status)

    p = sub.add_parser("query", help="run SQL against the lakehouse and print the result")
    p.add_argument(
        "sql",
        help="one SQL statement (Spark SQL, or DuckDB's with --engine duckdb); tables: "
        "staging.<t>, lakehouse.<t>",
    )
    p.add_argument(
        "--engine",
        choices=list(ENGINES),
        default="spark",
        help="spark (default: any statement, Spark SQL) or duckdb (reads only, DuckDB SQL, "
        "no JVM: about a second; local and rehearsal targets)",
    )
    p.add_argument(
        "--format",
        choices=["table", "csv", "json"],
        default="table",
        help="table (default), csv or json (one object per line)",
    )
    p.add_argument("--limit", type=int, default=1000, help="rows printed as a table (default 1000)")
    p.add_argument(
        "--as-of",
        metavar="INSTANT",
        help="read each lakehouse.<t> the SQL names as of this instant (ISO 8601, e.g. "
        "2026-01-01T00:00:00Z; no zone: UTC), from lakehouse.<t>__history (history: true, "
        "docs/history.md)",
    )
    p.set_defaults(run=run_query)

    p = sub.add_parser(
        "verify",
        help="compare a final table with a full export of its DynamoDB table, item by item "
        "(exit 0 equal, 1 not equal, 2 bad input)",
    )
    add_table_argument(p)
    p.add_argument(
        "export",
        metavar="EXPORT_FOLDER",
        nargs="?",
        help="a full export's folder (.../AWSDynamoDB/<ExportId>); or --from-dynamodb",
    )
    p.add_argument(
        "--from-dynamodb",
        action="store_true",
        help="take a full export now, under its own prefix (<export_to>/"
        f"{VERIFY_PREFIX}/: sync never stages it nor waits for it), and verify against it",
    )
    add_export_arguments(p)
    p.add_argument(
        "--repair",
        action="store_true",
        help="when not equal: stage the export as a re-baseline (changes newer than it still "
        "win), merge, and verify again; says which keys it changed",
    )
    p.add_argument(
        "--as-of",
        action="store_true",
        help="compare the table's history (history: true) as of the export's instant, instead "
        "of its final table (docs/history.md); not recorded as the table's last verify",
    )
    p.add_argument(
        "--metrics",
        action="store_true",
        help=f"publish the counts as CloudWatch metrics (namespace {METRICS_NAMESPACE}, "
        "dimension Table): the deployment's verify schedules set it",
    )
    p.add_argument(
        "--format", choices=["table", "json"], default="table", help="table (default) or json"
    )
    p.set_defaults(run=run_verify)


def run_status(args: argparse.Namespace) -> int:
    for table in selected_tables(args):
        group = list(statuses([table]))  # a single-table design: one status per entity table
        if len(group) == 1:
            print_status(group[0])
            continue
        # One change log feeds every entity table: its ledger once, a batch merged when every
        # entity table merged it; then each entity table's own lines.
        pending = {b for status in group for b in status.pending}
        shared = f" (one change log for its {len(group)} entity tables)"
        print_ledger(table.name, group[0].entries, pending, shared)
        for status in group:
            print(f"{status.table}:")
            print_table_lines(status)
    return 0


def print_status(status: TableStatus) -> None:
    print_ledger(status.table, status.entries, set(status.pending))
    print_table_lines(status)


def print_ledger(
    table: str, entries: list[ledger.Entry], pending: set[str], shared: str = ""
) -> None:
    print(f"{table}: {len(entries)} source(s) in the ledger{shared}")
    # Every export, and the last few stream batches.
    streamed = [e for e in entries if e.kind == ledger.STREAM]
    recent = streamed[-STREAM_BATCHES_SHOWN:]
    shown = [e for e in entries if e.kind != ledger.STREAM or e in recent]
    print(
        output.format_table(
            ["committed", "kind", "from", "to", "source", "merged"],
            [
                [
                    e.committed_at[:19],
                    e.kind.replace("_EXPORT", ""),
                    e.start or "",
                    e.end or "",
                    output.short_source(e.source)
                    + (f" ({len(e.file_names)} files)" if e.kind == ledger.STREAM else ""),
                    "no" if e.batch_id in pending else "yes",
                ]
                for e in shown
            ],
        )
    )
    if len(streamed) > STREAM_BATCHES_SHOWN:
        files = sum(len(e.file_names) for e in streamed)
        print(
            f"  ... and {len(streamed) - STREAM_BATCHES_SHOWN} earlier stream batches "
            f"({files} files in all)"
        )


def print_table_lines(status: TableStatus) -> None:
    """A final table's own lines: what waits for its merge, its rows, its verify, its files."""
    print(
        f"  last applied time: {status.last_applied}; staged rows not merged yet: "
        f"{status.unmerged_rows} ({len(status.pending)} batch(es)); final rows: "
        f"{status.final_rows}  (merge log: {names.CATALOG}.{names.STAGING}.{names.MERGE_LOG})"
    )
    for gap in status.gaps:
        print(
            f"  open gap: {gap.start.isoformat()} -> {gap.end.isoformat()} (no export covers it: "
            "ingest an incremental export of that window to fill it)"
        )
    print(f"  last verify: {status.last_verify or 'never (ddb-lakehouse verify)'}")
    print(f"  final table: {status.health}\n" if status.health else "")


def run_verify(args: argparse.Namespace) -> int:
    if bool(args.export) == bool(args.from_dynamodb):
        raise TableConfigError("give an export folder or --from-dynamodb (one of them)")
    if args.as_of and (args.repair or args.metrics):
        # Both are the final table's: a repair re-baselines it, the metrics are its alarm's.
        raise TableConfigError(
            "--as-of verifies the history: give it without --repair and --metrics"
        )
    table = get_table(args.table)
    # With --format json only the report goes to standard output; the progress to stderr.
    with contextlib.redirect_stdout(sys.stderr if args.format == "json" else sys.stdout):
        target = export_target(args) if args.from_dynamodb else None
        if args.repair and args.export:
            sync.check_repairable(table, args.export)
        report = verify(table, args.export, target, output.Console(), args.as_of)
        shown = [report]
        if args.repair and not report.equal:
            if args.format == "table":
                print_verify(report)
            shown.append(sync.repair(table, report, output.Console()))
        if args.metrics:  # what the table is now: after a repair, the repaired table's counts
            publish_metrics(shown[-1], args.table_arn or table.table_arn)
    if args.format == "json":
        document = shown[-1].as_json()
        if len(shown) > 1:
            document["before_repair"] = report.as_json()
        print(json.dumps(document, indent=2))
    else:
        if len(shown) > 1:
            print("after the repair:")
        print_verify(shown[-1])
    return 0 if shown[-1].equal else 1


def print_verify(report: verifying.VerifyReport) -> None:
    compared = report.table
    if report.history:
        compared = f"{names.history_table(report.table)} as of the export's instant,"
    print(
        f"{compared} against the full export of {report.export_time} ({report.items} items, "
        f"{report.export}):"
    )
    rows = [["equal", report.counts["equal"], ""]]
    for outcome in verifying.OUTCOMES[1:]:
        shown = report.first.get(outcome, [])
        if outcome == "different":
            shown = [f"{k} ({', '.join(report.attributes.get(k, []))})" for k in shown]
        rows.append([outcome.replace("_", " "), report.counts[outcome], "; ".join(shown)])
    print(output.format_table(["outcome", "items", "first keys"], rows))
    verdict = "EQUAL" if report.equal else "NOT EQUAL"
    print(f"{verdict} in {report.seconds:.1f}s")
    if report.unmerged:
        print(
            f"note: {report.unmerged} staged batch(es) of {report.table} are not merged yet: "
            "their keys were compared as the change log holds them (run `ddb-lakehouse merge`)"
        )
    if report.counts["duplicate"]:
        print(
            f"note: a final table holds each key once: `ddb-lakehouse rebuild --table "
            f"{report.table}` builds it again from its change log"
        )


def run_query(args: argparse.Namespace) -> int:
    moment = as_of.instant(args.as_of) if args.as_of else None
    result = query(args.sql, args.limit if args.format == "table" else None, args.engine, moment)
    output.write_rows(result.columns, result.rows, args.format)
    return 0
