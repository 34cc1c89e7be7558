"""``verify``: a final table against a full export of its DynamoDB table, item by item and value by
value, compared in DynamoDB JSON (ingestion.schema.canonical: each final row encoded back by code
that shares nothing with the decode).

One pass over each side: Spark reads the export's lines and the final table's rows, Python
workers put each into canonical form keyed by its key, Spark pairs them by key (a full outer
join), and Python workers compare each pair. A key whose final row changed after the export's
instant (its ``_version`` is later), or that has a staged change after it (a delete: the final
table no longer holds the row), is ``not comparable``: never counted equal or different. The
change log's state of such keys at the instant is not compared yet (docs/proving-it.md).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ingestion.config import names
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb.tables import TableConfig
from ingestion.schema import canonical
from ingestion.schema.types import Schema
from ingestion.sources import manifest
from ingestion.staging import chain, table_types

SHOWN = 10  # keys reported per outcome
OUTCOMES = ("equal", "missing", "extra", "different", "not_comparable")


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

    @property
    def equal(self) -> bool:
        return all(self.counts[o] == 0 for o in ("missing", "extra", "different"))

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


def _compared(schema: Schema, instant: int):
    """(key, ((export line, final row), changed later)) -> (outcome, key, attributes)."""

    def outcome(pair: Any) -> tuple[str, str, list[str]]:
        key, ((line, row), later) = pair
        if later or (row is not None and row["_version"] > instant):
            return "not_comparable", key, []
        if row is None:
            return "missing", key, []
        if line is None:
            return "extra", key, []
        expected = canonical.canonical_item(json.loads(line)["Item"])
        differ = canonical.different_attributes(expected, canonical.encode_row(row, schema))
        return ("different" if differ else "equal"), key, differ

    return outcome


def verify(spark: SparkSession, table: TableConfig, folder: str) -> VerifyReport:
    """The final table of ``table`` against the full export in ``folder``."""
    started = time.monotonic()
    export = manifest.read_export(folder)
    if export.export_type != manifest.FULL:
        raise VerifyError(
            f"{folder}: an {export.export_type}; verify compares a table with a full export "
            "(what the table held at one instant)"
        )
    chain.check_source(table, export)
    final = names.final_table(table.name)
    schema = table_types.current_schema(spark, table)
    if schema is None or not spark.catalog.tableExists(final):
        raise VerifyError(f"{table.name}: no final table yet: sync and merge it, then verify")
    instant = export.version_micros
    keys = [k.name for k in table.keys]
    lines = spark.read.text([str(f.path) for f in export.files]).rdd.map(lambda r: r["value"])
    exported = lines.map(_export_side(keys))
    held = spark.table(final).rdd.map(_final_side(keys, schema))
    later = _changed_after(spark, table, keys, schema, instant)
    paired = exported.fullOuterJoin(held).leftOuterJoin(later)
    compared = spark.createDataFrame(
        paired.map(_compared(schema, instant)),
        "outcome string, key string, attributes array<string>",
    ).localCheckpoint()
    counts = {o: 0 for o in OUTCOMES}
    for r in compared.groupBy("outcome").count().collect():  # at most five rows
        counts[r["outcome"]] = r["count"]
    first: dict[str, list[str]] = {}
    attributes: dict[str, list[str]] = {}
    for outcome in OUTCOMES[1:]:
        shown = compared.where(F.col("outcome") == outcome).orderBy("key").limit(SHOWN).collect()
        first[outcome] = [r["key"] for r in shown]
        if outcome == "different":
            attributes = {r["key"]: list(r["attributes"]) for r in shown}
    return VerifyReport(
        table=table.name,
        export=str(export.folder),
        export_time=export.export_time.isoformat() if export.export_time else "",
        items=export.item_count,
        counts=counts,
        first=first,
        attributes=attributes,
        seconds=time.monotonic() - started,
    )


def _changed_after(
    spark: SparkSession, table: TableConfig, keys: list[str], schema: Schema, instant: int
) -> Any:
    """The keys (as key text) with a staged change after the instant, paired with True."""
    staged = spark.table(names.staging_table(table.name)).where(F.col("_version") > instant)
    key_columns = [a.column for a in schema.attributes if a.key]
    key_schema = Schema(schema.table, tuple(a for a in schema.attributes if a.key))

    def key(row: Any) -> tuple[str, bool]:
        item = canonical.encode_row(row.asDict(), key_schema)
        return canonical.key_text(item, keys), True

    return staged.select(*key_columns).distinct().rdd.map(key)
