"""``verify``: a final table against a full export of its DynamoDB table, item by item and value by
value, in DynamoDB JSON (docs/proving-it.md).

Two passes. The first, in the JVM, reads each side once: every item's fingerprint (its key and a
hash of its canonical DynamoDB JSON, ingestion.maintenance.fingerprints) from the export and from
the final table, summed per bucket of keys on each side (no join); a bucket whose sums agree holds
equal items. The second runs only for the other buckets (none when the table is equal, every bucket
holding a key changed after the instant): their export lines and final rows, read again, go to
Python workers, which put each into canonical form, pair them by key and compare each pair
(ingestion.schema.canonical), naming the attributes that differ.

A key changed after the export's instant (a staged change with a later ``_version``) is compared as
the change log held it at the instant, when the change log can say: when the export is the table's
newest staged full export, whose rows maintenance never prunes (ingestion.maintenance.expiry), by
the full-export rule that state is the key's row in that export, or no item when it lacks the key.
Otherwise such a key is ``not comparable``: never counted equal or different. A final row kept for a
delete (``ttl_deletes: keep``) is no item. A key the final table holds more than once is
``duplicate``, whatever its rows hold.

Between an ingest and its merge: a key of a batch not merged yet is compared like a key changed
after the instant, as the change log holds it (the merge's lag is no difference; the report
says how many batches wait), and the final side is read with the final table's own columns (an
attribute staged but not merged has none there yet). A final column whose type differs from
staging's (drift adopted, the final table not rebuilt yet) cannot be compared: refused until
the next merge.

With ``as_of``, the table's history (``history: true``, docs/history.md) is compared instead: its
rows valid at the export's instant are the items it held then, whatever changed after, so no key
is out of reach but one of a batch not merged yet (its change not in the history), which is not
comparable. That run is not the final table's: the verify log does not record it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ingestion.catalog import ledger, merge_log, table_types
from ingestion.catalog import table as catalog_table
from ingestion.config import names
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb import change_order
from ingestion.dynamodb.tables import TableConfig
from ingestion.maintenance import fingerprints, first_pass, verify_log
from ingestion.maintenance.verify_log import OUTCOMES
from ingestion.merge import full_refresh
from ingestion.schema import canonical
from ingestion.schema.types import VALID_FROM, VALID_TO, Schema
from ingestion.sources import manifest
from ingestion.staging import chain

SHOWN = 10  # keys reported per outcome
DIFFERENCES = ("missing", "extra", "different", "duplicate")  # any of them: not equal
ABSENT = "absent"  # in neither at the instant (inserted after it): not counted


class VerifyError(LakehouseError):
    """The table or the export cannot be verified (no final table, not a full export...)."""


@dataclass(frozen=True)
class VerifyReport:
    table: str
    export: str  # the export's folder
    export_time: str  # its instant (ISO 8601)
    items: int  # items in the export
    counts: dict[str, int]  # per outcome (OUTCOMES)
    first: dict[str, list[str]]  # per outcome but equal: its first keys (as key text)
    attributes: dict[str, list[str]] = field(default_factory=dict)  # a different key's attributes
    seconds: float = 0.0
    unmerged: int = 0  # batches staged but not merged into the final table yet
    history: bool = False  # the table's history as of the export's instant, not its final table

    @property
    def equal(self) -> bool:
        return all(self.counts[o] == 0 for o in DIFFERENCES)

    def as_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "export": self.export,
            "export_time": self.export_time,
            "items": self.items,
            "equal": self.equal,
            "counts": {o: self.counts[o] for o in OUTCOMES},
            "first": self.first,
            "different_attributes": self.attributes,
            "unmerged_batches": self.unmerged,
            "history_as_of": self.history,
            "seconds": round(self.seconds, 1),
        }


def _export_side(keys: list[str]):
    def pair(line: str) -> tuple[str, str]:
        item = canonical.canonical_item(json.loads(line)["Item"])
        return canonical.key_text(item, keys), line

    return pair


def _final_side(keys: list[str], schema: Schema):
    def pair(row: Any) -> tuple[str, dict[str, Any]]:
        values = row.asDict(recursive=True)
        return canonical.key_text(canonical.encode_row(values, schema), keys), values

    return pair


def _compared(schema: Schema, instant: int, rebaselined: bool):
    """(key, ((export line, final rows), state at the instant)) -> (outcome, key, attributes).
    The state: None for a key not changed after the instant, else (known, row or None).
    ``rebaselined``: a full export newer than the instant is staged; its baseline rule may have
    deleted a key after the instant without a staged change of it, so a key the final table
    lacks is not comparable."""

    def outcome(pair: Any) -> tuple[str, str, list[str]]:
        key, ((line, rows), state) = pair
        rows = list(rows or ())
        if len(rows) > 1:
            return "duplicate", key, []  # a defect, whatever happened after the instant
        row = rows[0] if rows else None
        if state is not None:
            known, row = state
            if not known:
                return "not_comparable", key, []
        elif row is not None and row["_version"] > instant:
            return "not_comparable", key, []
        if row is None and line is None:
            return ABSENT, key, []  # inserted after the instant: no item of the export
        if row is None:
            return ("not_comparable" if rebaselined and state is None else "missing"), key, []
        if line is None:
            return "extra", key, []
        expected = canonical.canonical_item(json.loads(line)["Item"])
        differ = canonical.different_attributes(expected, canonical.encode_row(row, schema))
        return ("different" if differ else "equal"), key, differ

    return outcome


def verify(
    spark: SparkSession,
    table: TableConfig,
    folder: str,
    record: bool = True,
    as_of: bool = False,
) -> VerifyReport:
    """The final table of ``table`` against the full export in ``folder``; the run recorded
    in the verify log unless ``record`` is False (a heal's count of the keys it changes). With
    ``as_of``, the table's history at the export's instant instead (never recorded)."""
    started = time.monotonic()
    history = history_table(spark, table) if as_of else None  # before the export is read
    export = manifest.read_export(folder)
    if export.export_type != manifest.FULL:
        raise VerifyError(
            f"{folder}: an {export.export_type}; verify compares a table with a full export "
            "(what the table held at one instant)"
        )
    chain.check_source(table, export)
    schema = check_verifiable(spark, table)
    compared = history or names.final_table(table.name)
    held_schema = final_side_schema(spark, table, schema, compared)
    instant = export.version_micros
    paths = [str(f.path) for f in export.files]
    # A row kept for a delete (``ttl_deletes: keep`` keeps TTL-expired items, flagged) is no
    # item of the table: DynamoDB's export does not hold it.
    items = spark.table(compared)
    if as_of:
        at = F.timestamp_micros(F.lit(instant))
        valid_from, valid_to = F.col(VALID_FROM), F.col(VALID_TO)
        items = items.where((valid_from <= at) & (valid_to.isNull() | (valid_to > at)))
    items = items.where(~F.col("_operation").isin(*change_order.DELETE_OPERATIONS))
    staging = spark.table(names.staging_table(table.name))
    unmerged = merge_log.new_batches(spark, table.name, history=as_of)  # its own rows too
    changed = staging.where(
        unmerged_until(instant, unmerged) if as_of else changed_since(instant, unmerged)
    )
    equal, unsure = first_pass.proved(spark, paths, items, changed, schema, held_schema, instant)
    counts = {o: 0 for o in OUTCOMES}
    counts["equal"] = equal
    paired: DataFrame | None = None
    if unsure:
        paired = _second_pass(spark, table, export, paths, items, schema, unsure, changed, as_of)
        for r in paired.groupBy("outcome").count().collect():  # at most six rows
            counts[r["outcome"]] += r["count"]
    first: dict[str, list[str]] = {}
    attributes: dict[str, list[str]] = {}
    for outcome in OUTCOMES[1:]:
        shown = (
            []
            if paired is None
            else paired.where(F.col("outcome") == outcome).orderBy("key").limit(SHOWN).collect()
        )
        first[outcome] = [r["key"] for r in shown]
        if outcome == "different":
            attributes = {r["key"]: list(r["attributes"]) for r in shown}
    report = VerifyReport(
        table=table.name,
        export=str(export.folder),
        export_time=export.export_time.isoformat() if export.export_time else "",
        items=export.item_count,
        counts=counts,
        first=first,
        attributes=attributes,
        seconds=time.monotonic() - started,
        unmerged=len(unmerged),
        history=as_of,
    )
    if record and not as_of:
        verify_log.record_run(
            spark,
            report.table,
            export.export_arn,
            report.export_time,
            report.equal,
            report.items,
            report.counts,
        )
    return report


def _second_pass(
    spark: SparkSession,
    table: TableConfig,
    export: manifest.Export,
    paths: list[str],
    items: DataFrame,
    schema: Schema,
    buckets: list[int],
    changed: DataFrame,
    as_of: bool,
) -> DataFrame:
    """The items of the buckets the first pass could not prove equal, compared in Python:
    (outcome, key, attributes), cached. ``changed``: the staged changes whose keys the compared
    rows may not show at the instant. ``as_of``: the rows are a history's at the instant, so
    such a key (of a batch not merged yet) is not comparable, and no later export matters."""
    keys = [k.name for k in table.keys]
    chosen = F.broadcast(
        spark.createDataFrame([(b,) for b in buckets], f"`{first_pass.BUCKET}` int")
    )
    lines = fingerprints.read_export(spark, paths, schema)
    lines = first_pass.bucketed(lines.select("value", *fingerprints.export_keys(schema)))
    rows = first_pass.bucketed(items.select("*", *fingerprints.final_keys(schema)))
    picked_lines = lines.join(chosen, first_pass.BUCKET, "left_semi").select("value")
    picked_rows = rows.join(chosen, first_pass.BUCKET, "left_semi").select(*items.columns)
    exported = picked_lines.rdd.map(lambda r: r["value"]).map(_export_side(keys))
    # Each key's final rows, as a list: more than one is a duplicate.
    held = picked_rows.rdd.map(_final_side(keys, schema)).groupByKey().mapValues(list)
    # The newest full export (by its time, as maintenance picks the one it keeps whole).
    fulls = [e for e in ledger.entries(spark, table.name) if e.kind == manifest.FULL]
    newest = max(fulls, key=lambda e: e.end or "", default=None)
    kept = newest.batch_id if newest and newest.source == export.export_arn and not as_of else None
    rebaselined = bool(
        newest
        and not kept
        and not as_of
        and export.export_time
        and newest.end
        and datetime.fromisoformat(newest.end) > export.export_time
    )
    later = _state_at_instant(spark, table, schema, changed, kept)
    paired = exported.fullOuterJoin(held).leftOuterJoin(later)
    return (
        spark.createDataFrame(
            paired.map(_compared(schema, export.version_micros, rebaselined)),
            "outcome string, key string, attributes array<string>",
        )
        .where(F.col("outcome") != ABSENT)
        .localCheckpoint()
    )


def changed_since(instant: int, unmerged: list[str]) -> Column:
    """A staged change the final table may not show at the instant: later than it, or of a
    batch not merged yet (the merge's lag: such a key is compared as the change log holds it)."""
    later = F.col("_version") > instant
    return later | F.col("_batch_id").isin(unmerged) if unmerged else later


def unmerged_until(instant: int, unmerged: list[str]) -> Column:
    """A staged change a history may not show at the instant: of a batch not merged yet, and no
    later than the instant (a later one does not move the instant's rows)."""
    return (
        F.col("_batch_id").isin(unmerged) & (F.col("_version") <= instant)
        if unmerged
        else F.lit(False)
    )


def history_table(spark: SparkSession, table: TableConfig) -> str:
    """The table's history, refused when it keeps none or has not built it yet."""
    if not table.history:
        raise VerifyError(
            f"{table.name}: verify --as-of compares the table's history, and it keeps none: set "
            "`history: true` in its entry (docs/history.md)"
        )
    history = names.final_table(names.history_table(table.name))
    if not spark.catalog.tableExists(history):
        raise VerifyError(f"{table.name}: no history yet: its next merge builds it")
    return history


def check_verifiable(spark: SparkSession, table: TableConfig) -> Schema:
    """The table's types; refused when it has no final table to verify yet, when drift adopted
    since its last merge changed a column's type (before an export is paid for), or is a
    single-table design (its entity tables are not compared with an export yet: a known limit,
    docs/single-table-design.md)."""
    if table.entities is not None:
        raise VerifyError(
            f"{table.name}: verify does not compare a single-table design's entity tables with "
            "an export yet (docs/known-limits.md); `ddb-lakehouse status` shows each entity table"
        )
    schema = table_types.current_schema(spark, table)
    if schema is None or not spark.catalog.tableExists(names.final_table(table.name)):
        raise VerifyError(f"{table.name}: no final table yet: sync and merge it, then verify")
    (handle,) = catalog_table.load([table], spark)
    if full_refresh.needs_full_refresh(handle):
        raise VerifyError(
            f"{table.name}: the final table's column types differ from staging's (drift adopted "
            "since its last merge): run `ddb-lakehouse merge`, which rebuilds it, then verify"
        )
    return schema


def final_side_schema(
    spark: SparkSession, table: TableConfig, schema: Schema, compared: str | None = None
) -> Schema:
    """The types of the final table's side (or of ``compared``, its history): ``schema`` without
    the attributes staged but not merged yet (no column in the final table)."""
    columns = set(spark.table(compared or names.final_table(table.name)).columns)
    held = tuple(a for a in schema.attributes if a.key or a.column in columns)
    return replace(schema, attributes=held) if len(held) < len(schema.attributes) else schema


def _state_at_instant(
    spark: SparkSession,
    table: TableConfig,
    schema: Schema,
    changed: DataFrame,
    kept: str | None,
) -> Any:
    """Each key of the ``changed`` staged changes (after the instant, or not merged yet), as
    (key text, (known, row or None)). ``kept``: the batch of the export, when it is the table's
    newest staged full export (kept whole by maintenance): by the full-export rule a key's state
    at its instant is its row in that batch, or no item when the batch lacks it. Else not
    known."""
    keys = [k.name for k in table.keys]
    staging = spark.table(names.staging_table(table.name))
    key_columns = [a.column for a in schema.attributes if a.key]
    key_schema = Schema(schema.table, tuple(a for a in schema.attributes if a.key))
    changed = changed.select(*key_columns).distinct()

    def state(row: Any) -> tuple[str, tuple[bool, dict[str, Any] | None]]:
        values = row.asDict(recursive=True)
        key = canonical.key_text(canonical.encode_row(values, key_schema), keys)
        if kept is None:
            return key, (False, None)
        return key, (True, None if values.get("_batch_id") is None else values)

    if kept is None:
        return changed.rdd.map(state)
    exported = staging.where(F.col("_batch_id") == kept)
    return changed.join(exported, key_columns, "left").rdd.map(state)
