"""A table's history after a drift adoption (or a ``rebuild``) changed its types: every version
re-derived from its own row, never cast (docs/history.md).

The final table is built again from the change log; the history cannot be (``maintain`` prunes
the change log, the history keeps every version), so it is retyped from itself. A cast from one
column type to another is not a decode: ``1.5`` cast to text is ``1.50``, a map cast to text is
``{2.0, y}``, binary cast to text is raw bytes, and a value that fit no column before stays in
``_rest`` where the new column could hold it. Instead each row's item is given back from its
columns and ``_rest`` by the types it was written with and decoded by the new ones, exactly as an
ingest decodes it (``staging.retype``): its typed columns, ``_rest`` and ``_drift`` are those the
change log's row has.

The types a history was written with are the change log's when it last merged: the kept types,
or those a rebuild replaced (its commit's summary keeps them). The newest whose column types are
the history's is taken; when none is (the rebuild's commit expired before a merge ran), the merge
stops with one line, and the history stays as it is.

The retype is one atomic replace of the history (its properties kept): a reader sees the old
rows or the new ones. Run before the merge that needs it (``runner.run_merge``); a plain ``dbt
run`` meeting a history of older types refuses (``macros/history_merge.sql``).
"""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession
from pyspark.sql.types import _parse_datatype_string

from ingestion.catalog import table_types
from ingestion.catalog.table import Table
from ingestion.config import names
from ingestion.config.errors import LakehouseError
from ingestion.merge.full_refresh import plain_type, staged_types
from ingestion.schema import item_json, types
from ingestion.staging.retype import retyped

log = logging.getLogger(__name__)

TYPES_BEFORE = names.SUMMARY_KEYS["types_before"]  # on a rebuild's replace (maintenance.rebuild)
_NOT_VALUES = {*types.METADATA_COLUMNS, *types.HISTORY_COLUMNS, "_image"}


class HistoryTypesError(LakehouseError):
    """A history's rows cannot be re-derived: the types they were written with are not known."""


def retype_history(spark: SparkSession, table: Table) -> tuple[str, ...]:
    """Re-derive ``table``'s history when a column of it has another type than its change log's;
    the columns that changed (empty: nothing to do, or no history). Whether any did is read from
    the two tables' metadata (the handle's): the rows are read only when one did."""
    if not table.history or table.history_final is None or table.change_log is None:
        return ()
    staged = staged_types(table.change_log, table.name if table.config.staging else None)
    changed = tuple(
        c
        for c, kind in table.history_final.columns.items()
        if c not in _NOT_VALUES and c in staged and staged[c] != plain_type(kind)
    )
    current = table.kept_types
    if not changed or current is None:
        return ()
    history = names.final_table(names.history_table(table.name))
    held = spark.table(history)
    have = {f.name: f.dataType.simpleString() for f in held.schema.fields}
    written_with = _written_with(table, have, current)
    if written_with is None:
        raise HistoryTypesError(
            f"{table.name}: its history's columns {', '.join(changed)} have older types than its "
            "change log, and the types its rows were written with are no longer known (the "
            "rebuild that changed them has expired): nothing was merged. Its rows can only be "
            f"cast, which would change values; keep it as it is (set history: false for "
            f"{table.name}) or start it again (remove-table {table.name} --reset)"
        )
    new = item_json.final_table_schema(current, table.name)
    rows = retyped(held, new, table.config, staged_with=written_with, keep=types.HISTORY_COLUMNS)
    writer = rows.writeTo(history).using("iceberg")
    for key, value in table.history_final.properties.items():
        writer = writer.tableProperty(key, value)
    writer.createOrReplace()
    table.refresh("history")
    log.info("%s: history re-derived in its new types (%s)", table.name, ", ".join(changed))
    return changed


def _written_with(table: Table, have: dict[str, str], current: types.Schema) -> types.Schema | None:
    """The newest of the kept types and those each rebuild replaced (its commit's summary, in
    the change log's metadata the handle read) whose column types are the history's: the types
    its rows were written with, as its columns lie."""
    candidates = [current]
    commits = table.change_log.snapshots if table.change_log is not None else []
    for commit in sorted(commits, key=lambda c: c.committed_at, reverse=True):
        before = commit.summary.get(TYPES_BEFORE)
        if before:
            candidates.append(table_types.parse(before, table.entry, table.staging_name))
    for candidate in candidates:
        flat = item_json.final_table_schema(candidate, table.name)
        if _same_columns(flat, have):
            return flat
    return None


def _same_columns(schema: types.Schema, have: dict[str, str]) -> bool:
    """Whether every value column the history has is one of ``schema``'s, of the same type."""
    typed = {a.column: a.type for a in schema.attributes}
    for column, found in have.items():
        if column in _NOT_VALUES:
            continue
        if (
            column not in typed
            or _parse_datatype_string(typed[column].sql()).simpleString() != found
        ):
            return False
    return True
