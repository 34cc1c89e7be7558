"""``ddb-lakehouse``: the root parser, the command groups, and the errors a user can act on."""

from __future__ import annotations

import argparse
import logging
import sys
import time

from ingestion.config import settings

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


def user_errors() -> tuple[type[Exception], ...]:
    """Errors that end a command with a one-line message and exit code 2 (no traceback)."""
    from pyspark.errors import AnalysisException, ParseException

    from ingestion.aws.emr import EmrError
    from ingestion.aws.glue import GlueError
    from ingestion.aws.job_python import PackagingError
    from ingestion.dynamodb.tables import TableConfigError
    from ingestion.jobs.lease import LeaseLost
    from ingestion.jobs.table_lock import TableBusy
    from ingestion.jobs.watch import WatchError
    from ingestion.merge.runner import DbtError
    from ingestion.project.onboarding import OnboardingError
    from ingestion.schema.types import SchemaError
    from ingestion.sources.manifest import ExportError
    from ingestion.sources.s3_uri import LocationError
    from ingestion.sources.stream_files import StreamError
    from ingestion.spark.spark_config import ConfigError
    from ingestion.spark.spark_submit import SubmitError
    from ingestion.staging.append import StagingError

    return (
        ExportError,
        StagingError,
        TableConfigError,
        ConfigError,
        DbtError,
        SubmitError,
        LocationError,
        WatchError,
        TableBusy,
        LeaseLost,
        EmrError,
        PackagingError,
        GlueError,
        StreamError,
        OnboardingError,
        SchemaError,
        AnalysisException,
        ParseException,
    )


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    settings.export_environment()
    started = time.monotonic()
    try:
        code: int = args.run(args)
    except user_errors() as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    log.debug("%s finished in %.1fs", args.command, time.monotonic() - started)
    return code
