"""``ddb-lakehouse``: the product's commands. Thin: parses argv, calls the library, prints summaries.

The same entry runs under ``spark-submit ingestion/main.py <command> ...``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from ingestion import settings

log = logging.getLogger("ddb-lakehouse")


def _stream_arguments(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument(
        "--stream",
        required=required,
        metavar="LOCATION",
        help="where the stream's Lambda writes change files (s3://BUCKET/PREFIX or a folder); "
        "the table's files are under LOCATION/<table>/",
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


def _export_folder_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--table", required=True)
    p.add_argument("sources", nargs="*", metavar="EXPORT_FOLDER")
    p.add_argument(
        "--allow-gap", action="store_true", help="accept an export that leaves a gap in the chain"
    )


def _export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--table-arn", help="the DynamoDB table's ARN (default: table_arn in config)")
    p.add_argument(
        "--to", metavar="s3://BUCKET/PREFIX", help="where DynamoDB writes (default: export_to)"
    )
    p.add_argument(
        "--poll", type=float, default=30.0, help="seconds between DescribeExport calls (30)"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ddb-lakehouse",
        description="DynamoDB exports -> staging Iceberg change logs -> dbt merge -> final tables.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("sample", help="write sample DynamoDB exports in AWS's exact layout")
    p.add_argument("--out", type=Path, help="folder (default: $LAKEHOUSE_HOME/samples)")
    p.add_argument("--items", type=int, help="items per table (default: books 500, orders 2000)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--table", action="append", choices=["books", "orders"], help="only these")
    p.add_argument(
        "--incrementals",
        type=int,
        default=3,
        help="incremental exports of orders after its full export (default 3)",
    )

    sub.add_parser("init", help="create the embedded catalog and its namespaces")

    p = sub.add_parser("add-table", help="register a DynamoDB table (configuration + dbt model)")
    p.add_argument("name")
    p.add_argument("--partition-key", required=True, metavar="ATTR:TYPE")
    p.add_argument("--sort-key", metavar="ATTR:TYPE")
    p.add_argument(
        "--buckets",
        type=int,
        metavar="N",
        help="partition the final table by bucket(N, partition key): merges touch only the "
        "buckets their changes hit (for big tables; about one bucket per GB)",
    )

    p = sub.add_parser(
        "ingest",
        help="stage exports (folders .../AWSDynamoDB/<ExportId>), in order, or stream change files",
    )
    _export_folder_arguments(p)
    _stream_arguments(p, required=False)

    p = sub.add_parser(
        "watch",
        help="every --interval seconds: ingest new stream change files and merge (one Spark session)",
    )
    p.add_argument("--table", required=True)
    _stream_arguments(p, required=True)
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
        help="compact the final table every N ticks (default 60; 0 = never)",
    )
    p.add_argument(
        "--max-failures",
        type=int,
        default=5,
        help="stop after this many failed ticks in a row (default 5)",
    )

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

    p = sub.add_parser("drift", help="values staged that did not fit their column, per attribute")
    p.add_argument("--table", required=True)

    p = sub.add_parser(
        "rebuild", help="re-detect types from the staged images, rebuild staging and final table"
    )
    p.add_argument("--table", required=True)

    p = sub.add_parser("merge", help="dbt run + dbt test, with a report of the changes")
    p.add_argument("--table", action="append", help="only these tables (default: all)")

    p = sub.add_parser(
        "sync",
        help="ingest the exports in the order given (or export from DynamoDB first), then merge",
    )
    _export_folder_arguments(p)
    p.add_argument(
        "--from-dynamodb",
        action="store_true",
        help="export what the ledger lacks first (full export when the ledger is empty)",
    )
    _export_arguments(p)
    _stream_arguments(p, required=False)

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
    _export_arguments(p)

    p = sub.add_parser(
        "status", help="per table: the ledger, last applied time, unmerged rows, final rows"
    )
    p.add_argument("--table", action="append", help="only these tables (default: all)")

    p = sub.add_parser(
        "maintain",
        help="compact, carry the ledger forward, expire old snapshots, remove old orphan files",
    )
    p.add_argument("--table", action="append", help="only these tables (default: all)")
    p.add_argument(
        "--retention-hours",
        type=float,
        default=24.0,
        help="keep every snapshot younger than this (default 24; longer than your longest query)",
    )
    p.add_argument(
        "--keep-snapshots", type=int, default=5, help="and at least this many (default 5)"
    )

    p = sub.add_parser(
        "register-glue",
        help="register (or move) the final tables in the AWS Glue catalog for Athena",
    )
    p.add_argument("--table", action="append", help="only these tables (default: all)")
    p.add_argument("--database", default="lakehouse", help="Glue database (default lakehouse)")
    p.add_argument("--glue-endpoint", help="Glue endpoint URL (default: AWS's)")

    p = sub.add_parser("query", help="run SQL against the lakehouse and print the result")
    p.add_argument("sql")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    p.add_argument("--limit", type=int, default=1000, help="rows printed as a table (default 1000)")

    p = sub.add_parser("emr", help="run a command of this project on Amazon EMR")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    a = actions.add_parser("package", help="build project.zip (package + dbt project)")
    a.add_argument("--out", type=Path, default=Path("dist"), help="folder (default dist/)")
    a = actions.add_parser(
        "submit",
        help="package, upload, run `ddb-lakehouse ARGS...` on EMR Serverless or an EMR cluster",
    )
    a.add_argument("--code", required=True, metavar="s3://BUCKET/PREFIX", help="where to upload")
    where = a.add_mutually_exclusive_group(required=True)
    where.add_argument("--application-id", help="EMR Serverless application")
    where.add_argument("--cluster-id", help="EMR on EC2 cluster (adds a step)")
    a.add_argument("--role-arn", help="job execution role (EMR Serverless)")
    a.add_argument("--warehouse", metavar="s3://BUCKET/PREFIX", help="Iceberg warehouse on S3")
    a.add_argument("--venv-archive", metavar="s3://...", help="packed virtualenv (venv-pack)")
    a.add_argument("--poll", type=float, default=30.0, help="seconds between status calls")
    a.add_argument("--no-wait", action="store_true", help="submit and return")
    a.add_argument("arguments", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS")

    p = sub.add_parser("demo", help="sample -> spark-submit ingest -> dbt run/test -> report")
    p.add_argument("--items", type=int, help="items per table (default: books 500, orders 2000)")
    p.add_argument("--seed", type=int, default=7)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    settings.export_environment()
    from ingestion import commands

    handler = getattr(commands, "cmd_" + args.command.replace("-", "_"))
    started = time.monotonic()
    try:
        code = handler(args)
    except commands.USER_ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    log.debug("%s finished in %.1fs", args.command, time.monotonic() - started)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
