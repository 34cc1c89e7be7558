"""The rules of changes, written once on the Python side: what a change's operation is, which
operations delete, which change of a key is the latest, and what a full export's baseline is.

The dbt side has one macro per rule (``macros/change_order.sql``, ``delete_operations.sql``,
``baseline.sql``); ``tests/dynamodb/test_change_order.py`` compiles those macros and checks that
they say the same as this module.

- Operations: ``snapshot`` (an item of a full export), ``insert``, ``update``, ``upsert`` (a
  ``NEW_IMAGE`` incremental line), ``delete``, ``ttl_delete`` (DynamoDB's TTL removed the item).
- Deletes: ``delete`` and ``ttl_delete``; a table with ``ttl_deletes: keep`` keeps the row of a
  TTL expiry (flagged ``ttl_delete``), so only ``delete`` deletes there.
- Order: a change is later than another when its ``(_version, _sequence or '', _ingested_at,
  _batch_id, is a delete)`` is greater: the version decides, then the stream's sequence number;
  the last two break exact ties deterministically, and at equal versions a delete wins.
- Baseline: the newest full export re-baselines a table: a key whose latest change is older than
  that export's version was deleted before the export (the export does not hold it); not a kept
  TTL expiry (``ttl_deletes: keep``), which no later export holds by definition.
"""

from __future__ import annotations

from decimal import ROUND_FLOOR, Decimal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

SNAPSHOT = "snapshot"
DELETE = "delete"
TTL_DELETE = "ttl_delete"
DELETE_OPERATIONS = (DELETE, TTL_DELETE)  # what ends an item in DynamoDB


def deleting_operations(ttl_deletes: str) -> tuple[str, ...]:
    """The operations that delete the final row: ``ttl_deletes: keep`` keeps TTL expiries."""
    return (DELETE,) if ttl_deletes == "keep" else DELETE_OPERATIONS


def change_order() -> Column:
    """The struct whose maximum is a key's latest change (``max_by`` / ``max`` over it)."""
    return F.struct(
        F.col("_version"),
        F.coalesce(F.col("_sequence"), F.lit("")).alias("_sequence"),
        F.col("_ingested_at"),
        F.col("_batch_id"),
        F.col("_operation").isin(*DELETE_OPERATIONS).alias("_is_delete"),
    )


def change_order_sql() -> str:
    """The same order in Spark SQL, as ``macros/change_order.sql`` renders it."""
    deletes = ", ".join(f"'{op}'" for op in DELETE_OPERATIONS)
    return (
        "struct(`_version`, coalesce(`_sequence`, ''), `_ingested_at`, `_batch_id`, "
        f"`_operation` in ({deletes}))"
    )


def stream_version(created: int | str) -> int:
    """A stream change's version from its ``ApproximateCreationDateTime`` (epoch seconds, an
    integer or exact decimal text): the end of its second, or of its millisecond when it has a
    fraction, in microseconds (``decode.creation_version`` in Spark SQL)."""
    seconds = Decimal(str(created))
    if seconds == seconds.to_integral_value():
        return int(seconds) * 1_000_000 + 999_999
    return int((seconds * 1000).to_integral_value(rounding=ROUND_FLOOR)) * 1000 + 999


def full_export_rows(staged: DataFrame) -> DataFrame:
    """The rows of full exports (their version is the export time)."""
    return staged.where(F.col("_operation") == SNAPSHOT)
