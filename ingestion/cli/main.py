"""``ddb-lakehouse``: the root parser, the command groups, and one line for an error a user can
act on (any ``config.errors.LakehouseError``)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

from ingestion.config import names, settings
from ingestion.config.errors import LakehouseError

log = logging.getLogger("ddb-lakehouse")


def parser() -> argparse.ArgumentParser:
    from ingestion.cli import aws, demo, exports, inspection, maintenance, merge, streams, tables

    root = argparse.ArgumentParser(
        prog="ddb-lakehouse",
        description="DynamoDB exports -> staging Iceberg change logs -> dbt merge -> final tables.",
    )
    root.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # The order of `ddb-lakehouse --help`: the flow first, then inspection, AWS, the samples.
    for group in (tables, exports, streams, merge, maintenance, inspection, aws, demo):
        group.register(sub)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.verbose:
        os.environ["LAKEHOUSE_VERBOSE"] = "1"
    # Quiet by default: progress, the run summary and errors; every log with -v.
    logging.basicConfig(
        level=logging.DEBUG if settings.verbose() else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    settings.export_environment()
    started = time.monotonic()
    try:
        names.check_databases()
        code: int = args.run(args)
    except LakehouseError as exc:  # the one family of errors a user can cause (config.errors)
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_status
    log.debug("%s finished in %.1fs", args.command, time.monotonic() - started)
    return code
