"""Run the dbt merge (`dbt run` + `dbt test`) of tables' new batches, and measure what it changed
in each final table. dbt's process: ``dbt_process``; what the tests read: ``tested_rows``; the
re-baseline's full exports: ``full_exports``."""

from __future__ import annotations

import logging
import time
from typing import Any

from pyspark.sql import SparkSession

from ingestion import fault_points
from ingestion.catalog import table as catalog_table
from ingestion.catalog.merge_log import ensure_merge_log, record_merged
from ingestion.catalog.table import Table
from ingestion.dynamodb.tables import TableConfig
from ingestion.merge import dbt_process, merge_counts
from ingestion.merge.dbt_process import DbtError, dbt_test_args, selector
from ingestion.merge.full_exports import full_exports
from ingestion.merge.full_refresh import entities_refreshed, needs_full_refresh
from ingestion.merge.history_types import retype_history
from ingestion.merge.merge_counts import MergeCounts, before_refresh
from ingestion.merge.model_tests import check_model_tests
from ingestion.merge.tested_rows import test_scope
from ingestion.merge.touched_keys import TouchedKeys
from ingestion.spark import threads

log = logging.getLogger(__name__)

# `dbt run` of several final tables runs their models on as many threads, up to 4: each model
# commits its own table (Iceberg commits per table), so they are independent, and a small
# merge's time is mostly planning, metadata reads and commits that overlap another model's work
# (a watch of 10 stream tables: bench/tick_profile.py). A table's history (`history: true`) is a
# model of its own, independent of the final table's: it counts as one more. One model runs alone.
RUN_THREADS = threads.MOST_AT_ONCE


def handles(spark: SparkSession, tables: list[TableConfig] | list[Table]) -> list[Table]:
    """The final tables' handles of ``tables`` (entries' handles, or configurations loaded
    here), reading through ``spark``."""
    loaded = [t for t in tables if isinstance(t, Table)]
    loaded += catalog_table.load([t for t in tables if isinstance(t, TableConfig)], spark)
    for handle in loaded:
        if handle.spark is not spark:
            handle.use(spark)
    return [final for handle in loaded for final in handle.finals]


def run_merge(
    spark: SparkSession,
    tables: list[TableConfig] | list[Table],
    full_refresh: bool = False,
    test: bool = True,
    whole_tables: bool = False,
    also_test: dict[str, list[str]] | None = None,
    artifacts: bool = True,
) -> tuple[list[MergeCounts], float]:
    """`dbt run` then `dbt test` for the tables' models; the counts of what changed.

    The batches to merge are chosen here, by commit order (ledger minus merge log, each read
    once, by the table's handle), passed to dbt as a var, and recorded in the merge log only
    after `dbt run` and `dbt test` succeeded: a crash or a failed test in between leaves them
    unrecorded, so the next merge re-applies them (which changes nothing: latest change per key
    wins) and tests again, failing with the same message until the data or the rule is fixed.
    ``full_refresh`` rebuilds the final tables from the whole change log (after ``rebuild``);
    ``test=False`` skips `dbt test` (``watch`` runs it every few ticks, not on every one, and
    passes the batches merged since its last test as ``also_test``). The data tests look only at
    the keys the merged batches touched (``tested_rows.test_scope``), or at whole tables with
    ``whole_tables``."""
    started = time.monotonic()
    finals = handles(spark, tables)
    check_model_tests([t.config for t in finals])
    ensure_merge_log(spark)
    batches = {t.name: t.new_batches for t in finals}
    before = {t.name: t.snapshot for t in finals}
    # Drift adopted since the last build changed column types: only a full refresh changes them.
    refresh = {t.name for t in finals if full_refresh or needs_full_refresh(t)}
    # A refresh drops the final table's history: its keys and versions are kept for the counts.
    refreshed_from = {
        t.name: before_refresh(spark, t)
        for t in finals
        if t.name in refresh and before[t.name] is not None
    }
    ledgers = {t.name: t.ledger for t in finals}
    # Nothing new for a table that exists: no dbt run for it (not even an empty commit).
    to_run = [t for t in finals if t.name in refresh or batches[t.name] or before[t.name] is None]
    for t in to_run:  # a history whose types drift adoption changed: re-derived, never cast
        if t.history:
            retype_history(spark, t)
    exports = full_exports(ledgers, batches)  # the same for `dbt run` and `dbt test`
    for flag in (False, True):
        group = [t for t in to_run if (t.name in refresh) == flag]
        if group:
            run_vars = {
                "dynamodb_batches": {t.name: batches[t.name] for t in group},
                "dynamodb_full_exports": exports,
            }
            _dbt_run(spark, group, run_vars, flag, artifacts)
    if to_run:
        fault_points.point("after-merge-commit")
    else:
        log.info("nothing new to merge for %s", ", ".join(t.name for t in finals))
    for t in to_run:
        t.committed(replaced=t.name in refresh or before[t.name] is None)  # for the counts
    touched = TouchedKeys(spark)

    def counted() -> list[MergeCounts]:
        return threads.each(
            spark,
            lambda t: merge_counts.merged(
                spark, t, refreshed_from.get(t.name), before[t.name], batches[t.name], touched
            ),
            finals,
        )

    try:
        # The counts read only what the merge committed (its snapshots before and after): they
        # run while `dbt test` does, whose time is mostly dbt's own, on threads for several
        # tables (as their models do). Tests that fail leave them unused.
        with threads.meanwhile(spark, counted) as counting:
            if test:
                scope = test_scope(finals, batches, refresh, also_test or {})
                run_vars = {
                    "dynamodb_test_batches": {} if whole_tables else scope,
                    "dynamodb_full_check": whole_tables,
                    # Only rows as new as the batches' oldest change: the merge's own commit
                    # (macros/tests/dynamodb_final_table.sql says why that is enough).
                    "dynamodb_test_floor": True,
                    "dynamodb_full_exports": exports,
                }
                try:
                    dbt_process.dbt_invoke(
                        ["test", *dbt_test_args([t.model for t in finals])], run_vars, artifacts
                    )
                except DbtError as exc:
                    raise DbtError(
                        f"{exc}. The merged batches are not recorded as merged: the next merge "
                        "applies them again (a no-op) and tests again"
                    ) from exc
            record_merged(spark, {n: batches[t.name] for t in to_run for n in t.logged_as})
            _entities_refreshed(spark, finals, refresh, before)
        counts = counting.result()
    finally:
        touched.release()
    return counts, time.monotonic() - started


def _entities_refreshed(
    spark: SparkSession, finals: list[Table], refresh: set[str], before: dict[str, int | None]
) -> None:
    """Rows moved entity (``maintenance.entity_moves``): done once every final table of the
    entry was built whole (refreshed, or built for the first time)."""
    whole = {t.name for t in finals if t.name in refresh or before[t.name] is None}
    for entry in {t.config.staging for t in finals if t.config.staging and t.name in whole}:
        if all(f.name in whole for f in finals if f.config.staging == entry):
            entities_refreshed(spark, entry)


def full_check(
    spark: SparkSession, tables: list[TableConfig], artifacts: bool = True
) -> tuple[list[str], list[str]]:
    """`dbt test` of whole tables (``maintain``; a ``watch``, without dbt's JSON ``artifacts``):
    (tables tested, tables left out). A table with no final table, or with batches staged and
    not merged yet (a watch between its ingest and its merge), is left out: its final table
    cannot match its change log yet."""
    finals = handles(spark, tables)
    check_model_tests([t.config for t in finals])
    ensure_merge_log(spark)
    ready = [t for t in finals if t.snapshot is not None and not t.new_batches]
    if ready:
        run_vars = {
            "dynamodb_full_check": True,
            "dynamodb_full_exports": full_exports({t.name: t.ledger for t in ready}),
        }
        dbt_process.dbt_invoke(
            ["test", *dbt_test_args([t.model for t in ready])], run_vars, artifacts
        )
    return [t.name for t in ready], [t.name for t in finals if t not in ready]


def _dbt_run(
    spark: SparkSession,
    tables: list[Table],
    run_vars: dict[str, Any],
    full_refresh: bool,
    artifacts: bool = True,
) -> None:
    """`dbt run` of ``tables`` with ``run_vars``: ``dynamodb_batches`` (each table's batches to
    merge) and ``dynamodb_full_exports`` (``full_export_versions`` of each)."""
    models = len(tables) + sum(t.history for t in tables)
    try:
        dbt_process.dbt_invoke(
            [
                "run",
                *selector([t.model for t in tables]),
                *(["--full-refresh"] if full_refresh else []),
                *["--threads", str(min(models, RUN_THREADS))],
            ],
            run_vars,
            artifacts,
        )
    finally:
        # The changes a bucketed merge cached (merge_with_delete), in every outcome. dbt's
        # temporary views live in its own session, the cache in the shared state: clear that
        # (nothing else of this process is cached across a merge).
        spark.catalog.clearCache()
