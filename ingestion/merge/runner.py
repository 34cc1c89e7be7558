"""Run the dbt merge (`dbt run` + `dbt test`) and measure what it changed in each final table."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import threading
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingestion import fault_points
from ingestion.config import clock, names, settings
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb.entities import final_tables
from ingestion.dynamodb.tables import TableConfig, load_tables
from ingestion.merge.full_refresh import entities_refreshed, needs_full_refresh
from ingestion.merge.history_types import retype_history
from ingestion.merge.merge_counts import (
    MergeCounts,
    before_refresh,
    commit_counts,
    current_snapshot,
    refresh_counts,
)
from ingestion.merge.merge_log import ensure_merge_log, logged_names, new_batches, record_merged
from ingestion.merge.model_tests import check_model_tests
from ingestion.merge.touched_keys import TouchedKeys
from ingestion.schema.types import INSERTED_BATCH
from ingestion.sources import manifest
from ingestion.spark import out_of_memory, table_metadata, threads
from ingestion.staging import ledger, table_types

log = logging.getLogger(__name__)


class DbtError(LakehouseError):
    """A dbt command failed."""


# The merge's values for one dbt command (macros/run_var.sql, dynamodb_run_var): in
# the environment, not `--vars`, so that dbt's partial parsing stays valid from merge to merge.
RUN_VARIABLE = "DYNAMODB_LAKEHOUSE_RUN"
# `dbt test` runs its tests on 4 threads of this one SparkSession: they only read, and one
# test's planning and Iceberg metadata reads overlap another's scan (1M orders, the 7 tests of a
# merge: 2.9 s against 3.7 s on 1 thread). `dbt run`: RUN_THREADS, below.
TEST_THREADS = "4"
# `dbt run` of several final tables runs their models on as many threads, up to 4: each model
# commits its own table (Iceberg commits per table), so they are independent, and a small
# merge's time is mostly planning, metadata reads and commits that overlap another model's work
# (a watch of 10 stream tables: bench/tick_profile.py). A table's history (`history: true`) is a
# model of its own, independent of the final table's: it counts as one more. One model runs alone.
RUN_THREADS = threads.MOST_AT_ONCE


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
    ``run_vars`` in ``DYNAMODB_LAKEHOUSE_RUN`` for the command's duration only. Without
    ``artifacts``, dbt writes no ``target/manifest.json`` nor ``run_results.json`` (``watch``'s
    ticks, docs/performance.md says what that saves; a ``merge`` keeps them)."""
    if _loading is not None:
        _loading.join()  # its import done, not a second one beside it (Python's import locks)
    from dbt.cli.main import dbtRunner

    settings.export_environment()
    project = settings.project_dir()
    full = [*args, "--project-dir", str(project), "--profiles-dir", str(project)]
    full += output_flags() + ([] if artifacts else ["--no-write-json"])
    log.info("dbt %s", " ".join(args))
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
        result = dbtRunner(callbacks=callbacks).invoke(full)
    finally:
        os.environ.pop(RUN_VARIABLE, None)
    if not result.success:
        _out_of_memory(args, result)
        detail = f": {result.exception}" if result.exception else ""
        raise DbtError(
            f"`dbt {' '.join(args)}` failed{detail} (dbt's errors above; its whole log: "
            f"{dbt_log_file()})"
        )


def _out_of_memory(args: list[str], result: Any) -> None:
    """Raise ``OutOfMemory`` when a dbt command failed because Spark ran out of the driver's
    memory or stack, or its JVM died (``out_of_memory_in``): dbt reports that as a failed model
    like any other."""
    failed = [
        (str(getattr(getattr(r, "node", None), "name", "")), str(getattr(r, "message", "")))
        for r in getattr(getattr(result, "result", None), "results", None) or []
        if str(getattr(r, "status", "")) in ("error", "fail", "runtime error")
    ]  # fmt: skip
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
    tables = [t for t in load_tables().values() if any(m in (t.name, names.history_table(t.name)) for m in models)]  # fmt: skip
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


def selector(tables: list[TableConfig]) -> list[str]:
    return ["--select", *[f"{names.staging_model(t.name)}+" for t in tables]]


def dbt_test_args(tables: list[TableConfig]) -> list[str]:
    return [*selector(tables), "--threads", TEST_THREADS]


def run_merge(
    spark: SparkSession,
    tables: list[TableConfig],
    full_refresh: bool = False,
    test: bool = True,
    full_check: bool = False,
    also_test: dict[str, list[str]] | None = None,
    artifacts: bool = True,
) -> tuple[list[MergeCounts], float]:
    """`dbt run` then `dbt test` for the tables' models; the counts of what changed.

    The batches to merge are chosen here, by commit order (ledger minus merge log), passed to
    dbt as a var, and recorded in the merge log only after `dbt run` and `dbt test` succeeded: a
    crash or a failed test in between leaves them unrecorded, so the next merge re-applies them
    (which changes nothing: latest change per key wins) and tests again, failing with the same
    message until the data or the rule is fixed. ``full_refresh`` rebuilds the final tables from
    the whole change log (after ``rebuild``); ``test=False`` skips `dbt test` (``watch`` runs it
    every few ticks, not on every one, and passes the batches merged since its last test as
    ``also_test``). The data tests look only at the keys the merged batches touched
    (``test_scope``), or at whole tables with ``full_check``."""
    started = time.monotonic()
    tables = [final for table in tables for final in final_tables(table)]
    check_model_tests(tables)
    ensure_merge_log(spark)
    batches = {t.name: _new_batches(spark, t) for t in tables}
    before = {t.name: current_snapshot(spark, t.name) for t in tables}
    # Drift adopted since the last build changed column types: only a full refresh changes them.
    refresh = {t.name for t in tables if full_refresh or needs_full_refresh(spark, t)}
    # A refresh drops the final table's history: its keys and versions are kept for the counts.
    refreshed_from = {
        t.name: before_refresh(spark, t)
        for t in tables
        if t.name in refresh and before[t.name] is not None
    }
    # Nothing new for a table that exists: no dbt run for it (not even an empty commit).
    to_run = [t for t in tables if t.name in refresh or batches[t.name] or before[t.name] is None]
    for t in to_run:  # a history whose types drift adoption changed: re-derived, never cast
        retype_history(spark, t)
    if to_run:
        for flag in (False, True):
            group = [t for t in to_run if (t.name in refresh) == flag]
            if group:
                run_vars = {
                    "dynamodb_batches": {t.name: batches[t.name] for t in group},
                    "dynamodb_full_exports": full_exports(spark, group, batches),
                }
                _dbt_run(spark, group, run_vars, flag, artifacts)
        fault_points.point("after-merge-commit")
    else:
        log.info("nothing new to merge for %s", ", ".join(t.name for t in tables))
    after = {t.name: current_snapshot(spark, t.name) for t in tables}
    touched = TouchedKeys(spark)
    views: dict[str, dict[str, str]] = {}

    def counted(table: TableConfig) -> MergeCounts:
        # The final rows the tests read, when cached: the snapshot after, already read.
        tested = views.get(table.name, {}).get("final")
        after_rows = spark.table(tested) if tested else None
        found = _counted(spark, table, refreshed_from, before, after, batches, touched, after_rows)
        return replace(found, batches=tuple(batches[table.name]))

    try:
        scope: dict[str, list[str]] = {}
        if test:
            scope = (
                {} if full_check else test_scope(spark, tables, batches, refresh, also_test or {})
            )
            views = tested_views(spark, tables, scope, touched, after)
        # The counts read only what the merge committed (its snapshots before and after): they
        # run while `dbt test` does, whose time is mostly dbt's own and small queries, on threads
        # for several tables (as their models do). Tests that fail leave them unused.
        with threads.meanwhile(spark, lambda: threads.each(spark, counted, tables)) as counting:
            if test:
                run_vars = {
                    "dynamodb_test_batches": scope,
                    "dynamodb_tested_views": views,
                    "dynamodb_full_check": full_check,
                    "dynamodb_full_exports": full_exports(spark, tables, batches),
                }
                try:
                    dbt_invoke(["test", *dbt_test_args(tables)], run_vars, artifacts)
                except DbtError as exc:
                    raise DbtError(
                        f"{exc}. The merged batches are not recorded as merged: the next merge "
                        "applies them again (a no-op) and tests again"
                    ) from exc
            record_merged(
                spark,
                {n: batches[t.name] for t in to_run for n in logged_names(t.name, t.history)},
            )
            # Rows moved entity (``maintenance.entity_moves``): done once every final table of
            # the entry was built whole (refreshed, or built for the first time).
            whole = {t.name for t in tables if t.name in refresh or before[t.name] is None}
            for entry in {t.staging for t in tables if t.staging and t.name in whole}:
                if all(f.name in whole for f in tables if f.staging == entry):
                    entities_refreshed(spark, entry)
        counts = counting.result()
    finally:
        _drop(spark, views)
        touched.release()
    return counts, time.monotonic() - started


def _counted(
    spark: SparkSession,
    table: TableConfig,
    refreshed_from: dict[str, Any],
    before: dict[str, int | None],
    after: dict[str, int | None],
    batches: dict[str, list[str]],
    touched: TouchedKeys,
    after_rows: DataFrame | None,
) -> MergeCounts:
    """What a merge changed in one final table: from its refresh, or from its commits."""
    old = refreshed_from.get(table.name)
    if old is not None:
        return refresh_counts(spark, table, old, after[table.name])
    kinds = {e.batch_id: e.kind for e in ledger.entries(spark, table.name)}
    rebaselined = any(kinds.get(b) == manifest.FULL for b in batches[table.name])
    return commit_counts(
        spark,
        table,
        before[table.name],
        after[table.name],
        batches[table.name],
        touched,
        rebaselined,
        after_rows,
    )


def _new_batches(spark: SparkSession, table: TableConfig) -> list[str]:
    """The batches to merge (those the final table or its history lacks), from the staging
    table as the catalog holds it now: another process (a spark-submit ingest, a watch) may have
    committed since this session cached it."""
    table_metadata.read(spark, names.staging_table(table.name), fresh=True)
    return new_batches(spark, table.name, table.history)


def test_scope(
    spark: SparkSession,
    tables: list[TableConfig],
    batches: dict[str, list[str]],
    refreshed: set[str],
    also_test: dict[str, list[str]],
) -> dict[str, list[str]]:
    """The batches whose touched keys each table's data tests look at; a table left out is
    tested whole: after a full refresh, and when a full export is among its batches (its
    re-baseline removes keys it does not hold, which no batch touches)."""
    scope = {}
    for table in tables:
        tested = [*also_test.get(table.name, []), *batches[table.name]]
        kinds = {e.batch_id: e.kind for e in ledger.entries(spark, table.name)}
        if table.name in refreshed or any(kinds.get(b) == manifest.FULL for b in tested):
            continue
        scope[table.name] = tested
    return scope


# The change log's columns the scoped change-log tests read besides the keys: those of the change
# order (macros/change_order.sql, dynamodb_change_order_columns; tests/merge/test_data_tests.py
# checks the two lists agree).
CHANGE_ORDER_COLUMNS = ["_version", "_sequence", "_ingested_at", "_batch_id", "_operation"]
# The final table's columns the cached rows hold besides the keys: a row's version, which the
# merge's counts compare (merge_counts.versions).
FINAL_VERSION_COLUMNS = ["_version", "_sequence"]
FINAL_BATCH_COLUMNS = ["_batch_id", INSERTED_BATCH]


def tested_views(
    spark: SparkSession,
    tables: list[TableConfig],
    scope: dict[str, list[str]],
    touched: TouchedKeys,
    snapshots: dict[str, int | None] | None = None,
) -> dict[str, dict[str, str]]:
    """The rows a scoped `dbt test` reads, each read once, cached, as temporary views of this
    session (dbt's session: dbt-spark's `getOrCreate` returns it): per table whose tests are
    scoped, the final table's rows of the touched keys (``final``: the key columns, `_version`
    and `_sequence`, at the table's snapshot in ``snapshots``, the merge's, when given) and
    their staged changes' keys and change-order columns (``changes``), each side only the rows
    as new as the batches' oldest change or newer (below). Without them each scoped
    test found the touched rows itself: three scans of each table a merge (bench/apply_cost.py).
    The merge's counts reuse ``final`` as the state after the merge (no touched key's row
    after a correct merge is older), and ``touched``'s keys.
    Narrow on purpose: the whole rows cost more to read than the scans they spared (a final
    table's nested attributes). A test that needs other columns reads the table, as before
    (macros/test_scope.sql, dynamodb_tested). Entity tables of a single-table design are left
    out (their change log is a filter of the entry's, macros/entities.sql): their tests scan.
    Nothing is left behind when a read fails."""
    views: dict[str, dict[str, str]] = {}
    try:
        for table in tables:
            batches = scope.get(table.name)
            if not batches or table.staging:
                continue
            keys = [k.column for k in table.keys]
            keyed = F.broadcast(touched.of(table, batches))
            name = names.final_table(table.name)
            snapshot = (snapshots or {}).get(table.name)
            final = (
                spark.sql(f"select * from {name} version as of {int(snapshot)}")
                if snapshot is not None
                else spark.table(name)
            )
            log = spark.table(names.staging_table(table.name))
            # Only the rows as new as the batches' oldest change, or newer, on both sides: Iceberg
            # skips every older file (given `_version`'s metrics: by default a table's first 100
            # columns keep them), so the reads follow the batches, not the tables' sizes.
            # The changes: every touched key's latest change is among them
            # (TouchedKeys.oldest_version). The final rows: a touched key's row after a correct
            # merge is its latest change, or a row newer than it that the version guard kept, so
            # at least that new: the rows the merge's commit wrote, and those it left because
            # they were newer. A row the merge should have replaced or deleted and did not keeps
            # its older version and is not read here: that one guarantee (the MERGE statement
            # matched every row of its keys) moves to the whole-table tests of `merge
            # --full-check` and `maintain` (docs/exports-and-the-ledger.md, "What the tests read").
            oldest = touched.oldest_version(table, batches)
            if oldest is not None:
                log = log.where(F.col("_version") >= F.lit(oldest))
                final = final.where(F.col("_version") >= F.lit(oldest))
            # The batch columns too, when the table has them: the counts tell the commit's
            # inserts from its updates by them (merge_counts.from_commit).
            counted = [c for c in FINAL_BATCH_COLUMNS if c in final.columns]
            rows = {
                "final": final.select(*keys, *FINAL_VERSION_COLUMNS, *counted).join(
                    keyed, on=keys, how="left_semi"
                ),
                "changes": log.select(*keys, *CHANGE_ORDER_COLUMNS).join(
                    keyed, on=keys, how="left_semi"
                ),
            }
            suffix = hashlib.sha256(table.name.encode()).hexdigest()[:12]
            views[table.name] = {}
            for side, frame in rows.items():
                view = f"dynamodb_tested_{side}_{suffix}"
                frame.createOrReplaceTempView(view)
                views[table.name][side] = view
                spark.catalog.cacheTable(view)
        # Read at once: each is a scan the tests would otherwise each repeat.
        cached = [view for pair in views.values() for view in pair.values()]
        threads.each(spark, lambda view: spark.table(view).count(), cached)
    except BaseException:
        _drop(spark, views)
        raise
    return views


def _drop(spark: SparkSession, views: dict[str, dict[str, str]]) -> None:
    """The views of ``tested_views`` dropped, and so uncached (Spark uncaches a dropped view)."""
    for pair in views.values():
        for view in pair.values():
            spark.catalog.dropTempView(view)


def full_check(
    spark: SparkSession, tables: list[TableConfig], artifacts: bool = True
) -> tuple[list[str], list[str]]:
    """`dbt test` of whole tables (``maintain``; a ``watch``, without dbt's JSON ``artifacts``):
    (tables tested, tables left out). A table with no final table, or with batches staged and
    not merged yet (a watch between its ingest and its merge), is left out: its final table
    cannot match its change log yet."""
    tables = [final for table in tables for final in final_tables(table)]
    check_model_tests(tables)
    ensure_merge_log(spark)
    ready = [
        t
        for t in tables
        if current_snapshot(spark, t.name) is not None and not new_batches(spark, t.name, t.history)
    ]
    if ready:
        run_vars = {
            "dynamodb_full_check": True,
            "dynamodb_full_exports": full_exports(spark, ready),
        }
        dbt_invoke(["test", *dbt_test_args(ready)], run_vars, artifacts)
    return [t.name for t in ready], [t.name for t in tables if t not in ready]


def full_exports(
    spark: SparkSession, tables: list[TableConfig], batches: dict[str, list[str]] | None = None
) -> dict[str, dict[str, Any]]:
    """``full_export_versions`` of each table, as `dbt run` and `dbt test` take them: the tests
    apply the same re-baseline rule as the merge (``dynamodb_leaves_a_row``)."""
    batches = batches or {}
    found = {t.name: full_export_versions(spark, t.name, batches.get(t.name, [])) for t in tables}
    return {name: versions for name, versions in found.items() if versions is not None}


def full_export_versions(
    spark: SparkSession, table: str, batches: list[str]
) -> dict[str, Any] | None:
    """The versions of the re-baseline rule (macros/baseline.sql) from the ledger, for a merge
    of ``batches`` into ``table``: the newest full export staged (``newest``) and the newest
    among the batches (``among_batches``), each an export time in microseconds or None, and
    every full export's (``all``). A full
    export's rows are all `snapshot` at its export time, so this is what a `max(_version)` of
    the change log's snapshot rows finds, without that scan (two a merge, growing with the
    table): unless the export held no item, or retention pruned every row of it, where the
    ledger still knows the export and the scan did not. None when the ledger cannot say: no
    entry at all, or a full export's entry without its time (written before the ledger kept
    it): the macros then scan, as before."""
    newest: int | None = None
    among: int | None = None
    every: set[int] = set()
    entries = ledger.entries(spark, table)
    if not entries:
        return None
    for entry in entries:
        if entry.kind != manifest.FULL:
            continue
        if not entry.end:
            return None
        version = clock.epoch_micros(datetime.fromisoformat(entry.end))
        every.add(version)
        newest = version if newest is None else max(newest, version)
        if entry.batch_id in batches:
            among = version if among is None else max(among, version)
    # ``all``: every full export's version, for the history's late closes (macros/history.sql).
    return {"newest": newest, "among_batches": among, "all": sorted(every)}


def _dbt_run(
    spark: SparkSession,
    tables: list[TableConfig],
    run_vars: dict[str, Any],
    full_refresh: bool,
    artifacts: bool = True,
) -> None:
    """`dbt run` of ``tables`` with ``run_vars``: ``dynamodb_batches`` (each table's batches to
    merge) and ``dynamodb_full_exports`` (``full_export_versions`` of each)."""
    try:
        dbt_invoke(
            [
                "run",
                *selector(tables),
                *(["--full-refresh"] if full_refresh else []),
                *["--threads", str(min(len(tables) + sum(t.history for t in tables), RUN_THREADS))],
            ],
            run_vars,
            artifacts,
        )
    finally:
        # The changes a bucketed merge cached (merge_with_delete), in every outcome. dbt's
        # temporary views live in its own session, the cache in the shared state: clear that
        # (nothing else of this process is cached across a merge).
        spark.catalog.clearCache()
