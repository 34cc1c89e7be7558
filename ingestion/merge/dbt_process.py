"""dbt in this process: one command at a time, sharing this process's SparkSession (dbt-spark's
``getOrCreate`` returns it), with the merge's values in the environment, its output and its
failures said in one line (``DbtError``, or ``OutOfMemory`` when Spark ran out of memory)."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any, NoReturn

from ingestion import fault_points
from ingestion.catalog import table_types
from ingestion.config import names, settings
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb.tables import load_tables
from ingestion.merge import dbt_manifest
from ingestion.spark import out_of_memory

log = logging.getLogger(__name__)


class DbtError(LakehouseError):
    """A dbt command failed."""


# The merge's values for one dbt command (macros/run_var.sql, dynamodb_run_var): in
# the environment, not `--vars`, so that dbt's partial parsing stays valid from merge to merge.
RUN_VARIABLE = "DYNAMODB_LAKEHOUSE_RUN"
# `dbt test` runs its tests on 4 threads of this one SparkSession: they only read, and one
# test's planning and Iceberg metadata reads overlap another's scan (1M orders, the 7 tests of a
# merge: 2.9 s against 3.7 s on 1 thread). `dbt run`: runner.RUN_THREADS.
TEST_THREADS = "4"


def load_dbt_meanwhile() -> threading.Thread | None:
    """dbt's modules imported on a thread of their own while the caller goes on (stages, starts
    Spark): about 1.7 s of Python before a process's first dbt command (a `sync` of 10,000
    changes: bench/apply_cost.py --processes). That command then finds them loaded, or waits
    for the import under way (Python's import lock); an import that fails there is logged and
    made again by the command, which reports its error. The thread is no daemon: a process that
    ends first waits for it rather than stop it halfway through an import. None when dbt is
    loaded (or being loaded) already."""
    global _loading
    if "dbt.cli.main" in sys.modules or _loading is not None:
        return None
    settings.export_environment()  # before dbt reads any of it, as dbt_invoke does
    _loading = threading.Thread(target=_import_dbt, name="dbt import")
    _loading.start()
    return _loading


_loading: threading.Thread | None = None  # load_dbt_meanwhile's thread, once a process


def _import_dbt() -> None:
    try:
        import dbt.cli.main  # noqa: F401
    except Exception:  # noqa: BLE001 (dbt_invoke imports it again and reports what fails)
        log.debug("dbt's modules could not be imported ahead", exc_info=True)


def dbt_invoke(
    args: list[str], run_vars: dict[str, Any] | None = None, artifacts: bool = True
) -> None:
    """Run one dbt command in this process (it shares this process's SparkSession), with
    ``run_vars`` in ``DYNAMODB_LAKEHOUSE_RUN`` for the command's duration only. The project is
    parsed once while its files, the environment variables they read and the command's parse
    flags stay the same (``dbt_manifest``; a failed parse fails as `dbt parse`); the parse
    writes ``target/manifest.json``. Each command writes ``run_results.json``, unless without
    ``artifacts`` (``watch``'s ticks, docs/performance.md says what that saves; a ``merge``
    keeps it)."""
    if _loading is not None:
        _loading.join()  # its import done, not a second one beside it (Python's import locks)
    from dbt.cli.main import dbtRunner

    settings.export_environment()
    project = settings.project_dir()
    where = ["--project-dir", str(project), "--profiles-dir", str(project), *output_flags()]
    log.info("dbt %s", " ".join(args))
    flags = dbt_manifest.parse_flags(args)
    parsed_from = dbt_manifest.key(project, flags)
    manifest = dbt_manifest.kept(parsed_from)
    if args[0] == "parse" or manifest is None:
        # The project parsed once, its manifest kept for every command after it in this process
        # (dbt_manifest). The parse writes target/manifest.json, a command on it run_results.json.
        parsed = dbtRunner().invoke(["parse", *flags, *where])
        if not parsed.success:
            _failed(["parse", *flags], parsed)
        dbt_manifest.keep(parsed_from, parsed.result)
        if args[0] == "parse":
            return
        manifest = dbt_manifest.kept(parsed_from)
    full = [*args, *where, "--no-write-json"]
    callbacks: list[Any] = []
    if (
        os.environ.get("LAKEHOUSE_FAULT") == "during-merge"
    ):  # the crash tests (ingestion.fault_points)

        def on_event(event: Any) -> None:
            if "merge into" in str(getattr(event.data, "sql", "")).lower():
                fault_points.point("during-merge")

        callbacks.append(on_event)
    if run_vars:
        os.environ[RUN_VARIABLE] = json.dumps(run_vars)
    try:
        result = dbtRunner(manifest=manifest, callbacks=callbacks).invoke(full)
    finally:
        os.environ.pop(RUN_VARIABLE, None)
    ran: Any = result.result  # a command's results (a RunExecutionResult), or None if it failed
    if artifacts and hasattr(ran, "write"):
        ran.write(str(dbt_manifest.target_path(project, flags) / "run_results.json"))
    if not result.success:
        _failed(args, result)


def _failed(args: list[str], result: Any) -> NoReturn:
    """Raise what a failed dbt command says: ``OutOfMemory``, or ``DbtError`` naming what the
    project's final-table test found."""
    _out_of_memory(args, result)
    detail = f": {result.exception}" if result.exception else ""
    found = failed_checks(result)
    said = f"; {'; '.join(found)}" if found else ""
    raise DbtError(
        f"`dbt {' '.join(args)}` failed{detail}{said} (dbt's errors above; its whole log: "
        f"{dbt_log_file()})"
    )


# The project's one data test of a final table (macros/tests/dynamodb_final_table.sql): its rows
# name the checks that failed.
FINAL_TABLE_TEST = "dynamodb_final_table"


def failed_checks(result: Any) -> list[str]:
    """What each failed ``FINAL_TABLE_TEST`` found, one line per final table ("books: rows
    missing 3, keys more than once 1"): its compiled query run again, in this process's Spark
    session, which only a failure pays (dbt reports a test's count of rows, not the rows). Empty
    when there is none, or no session to ask."""
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    lines = []
    for r in getattr(getattr(result, "result", None), "results", None) or []:
        node: Any = getattr(r, "node", None)
        metadata: Any = getattr(node, "test_metadata", None)
        if str(getattr(r, "status", "")) != "fail" or getattr(metadata, "name", None) != (
            FINAL_TABLE_TEST
        ):
            continue
        table = (metadata.kwargs or {}).get("table") or "?"
        compiled = getattr(node, "compiled_code", None)
        if spark is None or not compiled:
            continue
        try:
            rows = spark.sql(compiled).collect()
        except Exception:  # noqa: BLE001 (a detail of the message: never a second failure)
            log.debug("the failed test %s could not be run again", node.name, exc_info=True)
            continue
        if rows:
            lines.append(f"{table}: " + ", ".join(f"{row[0]} {row[1]}" for row in rows))
    return lines


def _out_of_memory(args: list[str], result: Any) -> None:
    """Raise ``OutOfMemory`` when a dbt command failed because Spark ran out of the driver's
    memory or stack, or its JVM died (``out_of_memory_in``): dbt reports that as a failed model
    like any other."""
    failed = [
        (str(getattr(getattr(r, "node", None), "name", "")), str(getattr(r, "message", "")))
        for r in getattr(getattr(result, "result", None), "results", None) or []
        if str(getattr(r, "status", "")) in ("error", "fail", "runtime error")
    ]
    if result.exception is not None:
        failed.append(("", str(result.exception)))
    found = out_of_memory_in(f"dbt {args[0]}", failed)
    if found is not None:
        raise found from None


def out_of_memory_in(step: str, failed: list[tuple[str, str]]) -> out_of_memory.OutOfMemory | None:
    """One line for a dbt command whose failed models (name, dbt's message) ran out of memory or
    stack: their tables, the largest attribute (of the one table's kept types, read without
    Spark) and what to do; None for any other failure. Every model commits once, at its end, so
    nothing is half-applied, and the batches stay unrecorded."""
    said = next((c for _, m in failed if (c := out_of_memory.cause(Exception(m)))), None)
    if said is None:
        return None
    models = [m for m, _ in failed if m]
    tables = [
        t
        for t in load_tables().values()
        if any(m in (t.name, names.history_table(t.name)) for m in models)
    ]
    kept = table_types.kept_without_spark(tables[0]) if len(tables) == 1 else None
    subject = tables[0].name if kept else ", ".join(models)
    return out_of_memory.OutOfMemory(out_of_memory.message(subject or None, step, said, kept))


def dbt_log_file() -> Path:
    """Where dbt writes its log (``DBT_LOG_PATH``, default ``logs/`` in the project)."""
    folder = os.environ.get("DBT_LOG_PATH") or str(settings.project_dir() / "logs")
    return Path(folder) / "dbt.log"


def on_screen() -> bool:
    """dbt's log on screen: with ``-v``, and on ``emr``, where a file dies with the container
    and the job's output is what stays (EMR Serverless keeps the driver's stdout)."""
    return settings.verbose() or settings.target() == "emr"


def output_flags() -> list[str]:
    """dbt's own output: its errors only, unless ``on_screen``; no colour codes when standard
    output is no terminal (a file, a pipe, a CI log)."""
    flags = [] if on_screen() else ["--quiet"]
    if not sys.stdout.isatty():
        flags.append("--no-use-colors")
    return flags


def selector(models: list[str]) -> list[str]:
    """dbt's selection of the staging ``models`` (``names.staging_model``, a table handle's
    ``model``) and what they feed: the final tables and their histories."""
    return ["--select", *[f"{model}+" for model in models]]


def dbt_test_args(models: list[str]) -> list[str]:
    return [*selector(models), "--threads", TEST_THREADS]
