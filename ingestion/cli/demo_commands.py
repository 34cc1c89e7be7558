"""The sample generator's commands: ``sample`` (write sample exports) and ``demo`` (the whole
flow on them, each ingest a ``spark-submit`` job as a user would run it)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from ingestion.cli import output
from ingestion.config import clock, names, settings
from ingestion.samples import demo, own_exports


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sample", help="write sample DynamoDB exports in AWS's exact layout")
    p.add_argument("--out", type=Path, help="folder (default: $LAKEHOUSE_HOME/samples)")
    _size_and_seed(p)
    p.add_argument(
        "--table",
        action="append",
        choices=["books", "orders", "app"],
        help="only these (default books and orders); app: a single-table design of users, "
        "orders and addresses, not written by default (docs/single-table-design.md)",
    )
    p.add_argument(
        "--incrementals",
        type=int,
        default=3,
        help="incremental exports of orders after its full export (default 3)",
    )
    p.set_defaults(run=run_sample)

    p = sub.add_parser(
        "write-export",
        help="write a full or incremental export of your own items (JSON Lines) in AWS's exact "
        "layout, to try the lakehouse on a table of your own",
    )
    p.add_argument("--table", required=True, help="the DynamoDB table's name (as in its ARN)")
    p.add_argument("--partition-key", required=True, help="ATTR or ATTR:TYPE: every item holds it")
    p.add_argument("--sort-key", help="ATTR or ATTR:TYPE")
    given = p.add_mutually_exclusive_group(required=True)
    given.add_argument("--items", type=Path, help="JSON Lines, one item a line: a full export")
    given.add_argument(
        "--changes",
        type=Path,
        help='JSON Lines, one change a line ({"Keys", "NewImage", "OldImage"}): an '
        "incremental export",
    )
    p.add_argument("--at", help="a full export's time, ISO 8601 (default: now)")
    p.add_argument(
        "--from",
        dest="start",
        help="an incremental export's window start, ISO 8601 (required with --changes; the "
        "previous export's time)",
    )
    p.add_argument("--to", dest="end", help="its window end, ISO 8601 (default: now)")
    p.add_argument("--out", type=Path, help="folder (default: $LAKEHOUSE_HOME/exports)")
    p.set_defaults(run=run_write_export)

    p = sub.add_parser("demo", help="sample -> spark-submit ingest -> dbt run/test -> report")
    _size_and_seed(p)
    p.set_defaults(run=run_demo)


def _size_and_seed(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--items",
        type=int,
        help="items per table (default: books 500, orders 2000; for app: its users, default 200, "
        "4.2 items each)",
    )
    p.add_argument("--seed", type=int, default=7, help="the sample data's random seed (default 7)")


def run_sample(args: argparse.Namespace) -> int:
    out = args.out or settings.lakehouse_home() / "samples"
    demo.write_sample_files(
        out, args.items, args.seed, args.table, args.incrementals, output.Console().line
    )
    return 0


def _instant(text: str | None, option: str) -> datetime:
    if text is None:
        return clock.utc_now()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise own_exports.ItemsFileError(
            f"{option} {text!r}: not an ISO 8601 time (e.g. 2026-12-06T09:00:00Z)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def run_write_export(args: argparse.Namespace) -> int:
    out = args.out or settings.lakehouse_home() / "exports"
    keys = own_exports.parse_keys(args.partition_key, args.sort_key)
    if args.items is not None:
        folder = own_exports.write_full(
            out, args.table, args.items, keys, _instant(args.at, "--at")
        )
    else:
        if args.start is None:
            raise own_exports.ItemsFileError(
                "--changes needs --from: the window's start (the previous export's time)"
            )
        window = (_instant(args.start, "--from"), _instant(args.end, "--to"))
        folder = own_exports.write_incremental(out, args.table, args.changes, keys, window)
    print(f"export written: {folder}")
    given = f"--partition-key {args.partition_key}" + (
        f" --sort-key {args.sort_key}" if args.sort_key else ""
    )
    print(
        f"next: ddb-lakehouse add-table {args.table} {given} (once; each key as ATTR:TYPE, S, N or "
        f"B), then"
    )
    print(f"      ddb-lakehouse sync --table {args.table} {folder}")
    return 0


def run_demo(args: argparse.Namespace) -> int:
    result = demo.run_demo(args.items, args.seed, output.Console())
    print()
    print(
        output.format_table(
            [
                "final table",
                "rows",
                "items left by the exports and streams (from the files)",
                "match",
            ],
            [
                [
                    f"{names.FINAL}.{t}",
                    n,
                    result.expected[t],
                    "yes" if n == result.expected[t] else "NO",
                ]
                for t, n in result.rows.items()
            ],
        )
    )
    print(f"\nexample query: {demo.EXAMPLE_QUERY}")
    output.write_rows(result.query_columns, result.query_rows, "table")
    v = result.verified
    print(
        f"\nverify: {names.FINAL}.books against its full export ({v.items} items): "
        f"{v.counts['equal']} equal (the keys the stream changed since, as the change log held "
        f"them at the export's instant), {v.counts['missing']} missing, {v.counts['extra']} "
        f"extra, {v.counts['different']} different, {v.counts['duplicate']} duplicate, "
        f"{v.counts['not_comparable']} not "
        f"comparable: {'EQUAL' if v.equal else 'NOT EQUAL'} "
        f"(ddb-lakehouse verify --table books {v.export})"
    )
    print(
        f"\ndemo finished in {result.seconds:.1f}s; try: "
        f'ddb-lakehouse status  or  ddb-lakehouse query "select count(*) from {names.FINAL}.orders"'
    )
    return 0 if result.matches else 1
