"""``ddb-lakehouse``: the root parser, the command groups, and one line for an error a user can
act on (any ``config.errors.LakehouseError``)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

from ingestion.config import names, settings
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb.tables import load_tables
from ingestion.project import scaffold
from ingestion.schema.types import Schema
from ingestion.spark import out_of_memory

log = logging.getLogger("ddb-lakehouse")


def parser() -> argparse.ArgumentParser:
    from ingestion.cli import (
        aws_commands,
        demo_commands,
        export_commands,
        inspection_commands,
        maintenance_commands,
        merge_commands,
        stream_commands,
        table_commands,
    )

    root = argparse.ArgumentParser(
        prog="ddb-lakehouse",
        description="DynamoDB exports -> staging Iceberg change logs -> dbt merge -> final tables.",
    )
    root.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    root.add_argument(
        "--project-dir",
        metavar="DIR",
        help="the project folder (holds dbt_project.yml; default: the project the package is "
        "installed from, else the current folder; also LAKEHOUSE_PROJECT_DIR)",
    )
    sub = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # The order of `ddb-lakehouse --help`: the flow first, then inspection, AWS, the samples.
    for group in (
        table_commands,
        export_commands,
        stream_commands,
        merge_commands,
        maintenance_commands,
        inspection_commands,
        aws_commands,
        demo_commands,
    ):
        group.register(sub)
    return root


# The commands that merge: a single-table design's entity models they need are written first.
MERGING = ("sync", "merge", "watch", "rebuild", "ingest")


def entity_models() -> None:
    """The dbt models of each single-table design's entity tables that do not exist yet
    written (its rule changed in ``dbt_project.yml`` and the table reset:
    docs/single-table-design.md), and of each history a ``history: true`` set by hand asks for
    (docs/history.md), each said; a person's edits to existing ones are kept."""
    root = settings.project_dir()
    for table in load_tables().values():
        for path in scaffold.write_missing_history(table, root):
            print(f"{table.name}: wrote {path.relative_to(root)} (its history's dbt model)")
        if table.entities is None or not scaffold.rule_in_force(table):
            continue  # no rule, or a changed one the command refuses, naming the reset
        for path in scaffold.write_missing(table, root):
            print(f"{table.name}: wrote {path.relative_to(root)} (an entity table's dbt model)")
        deleted, edited = scaffold.replaced_models(table, root)
        for path in deleted:
            print(
                f"{table.name}: deleted {path.relative_to(root)} (its entity tables' models "
                f"replace it)"
            )
        for path in edited:
            print(
                f"{table.name}: {path.relative_to(root)} is edited, left: delete it (its entity "
                f"tables' models replace it)"
            )


def _not_a_dead_jvm(record: logging.LogRecord) -> bool:
    """py4j logs a traceback on the root logger when the JVM died under a call (out of memory):
    the command's own line says what happened (``out_of_memory``); ``-v`` shows it."""
    return record.getMessage() != "Exception while sending command."


def _kept_types(table: str | None) -> Schema | None:
    """The kept types of the one table a failed command named, read without Spark (its JVM may
    be gone), to name its largest attribute; None when there is no one table or no such read."""
    try:
        entry = load_tables().get(table) if table else None
    except LakehouseError:
        return None
    if entry is None:
        return None
    from ingestion.catalog import table_types  # PySpark's modules: only on this failure's path

    return table_types.kept_without_spark(entry)


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
    if not settings.verbose():
        for handler in logging.getLogger().handlers:
            handler.addFilter(_not_a_dead_jvm)
    if args.project_dir:
        os.environ["LAKEHOUSE_PROJECT_DIR"] = str(Path(args.project_dir).resolve())
    started = time.monotonic()
    try:
        settings.export_environment()
        names.check_databases()
        if args.command in MERGING:
            entity_models()
        code: int = args.run(args)
    except LakehouseError as exc:  # the one family of errors a user can cause (config.errors)
        if isinstance(exc, out_of_memory.OutOfMemory):
            out_of_memory.end_jvm()  # its last warnings before the line, not after
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_status
    except Exception as exc:
        # Out of memory (or a JVM that died of it) in a step no narrower handler names: one line
        # still, with the command and its table (ingestion.spark.out_of_memory).
        said = out_of_memory.cause(exc)
        if said is None:
            raise
        if settings.verbose():  # -v: where it happened, for a report
            log.error("the failure, in full", exc_info=exc)
        table = getattr(args, "table", None)
        table = ", ".join(table) if isinstance(table, list) else table
        line = out_of_memory.message(table, args.command, said, _kept_types(table))
        out_of_memory.end_jvm()  # its last warnings before the line, not after
        print(f"error: {line}", file=sys.stderr)
        return out_of_memory.OutOfMemory.exit_status
    log.debug("%s finished in %.1fs", args.command, time.monotonic() - started)
    return code
