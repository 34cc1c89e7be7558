"""Damaged stream lines: why a line cannot be staged, and ``staging.<table>_rejects`` where the
ones a run may set aside (``--max-rejects``) are kept with file, line, reason and raw text."""

from __future__ import annotations

import hashlib

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ingestion.config import names
from ingestion.dynamodb.decode import creation_time_valid
from ingestion.dynamodb.tables import TableConfig
from ingestion.dynamodb.values import parse_item, sql_string
from ingestion.schema import schema_file
from ingestion.schema.typed_columns import typed
from ingestion.schema.types import ColumnType, Schema


def key_types(table: TableConfig, current: Schema | None) -> dict[str, ColumnType]:
    """Each key's column type: the table's current types', else the declared one."""
    declared = schema_file.declared_keys(table)
    typed_keys = {a.name: a for a in current.attributes} if current else {}
    return {n: typed_keys[n].type if n in typed_keys else t for n, t in declared.items()}


# The columns ``with_reject_reason`` parses each line into once, dropped again after the check.
_LINE, _KEYS, _ITEM_KEYS = "_check_line", "_check_keys", "_check_item_keys"


def with_reject_reason(lines: DataFrame, table: TableConfig, current: Schema | None) -> DataFrame:
    """``lines`` (``value``) with ``_reject``: why a change-file line cannot be staged, or null
    when it can: a key that its column cannot hold (a number beyond a bigint key column an older
    schema file set) included, so ``--max-rejects`` can set such a line aside instead of the whole
    batch failing.

    Each line is parsed once, into columns of their own, and the reasons read those: written as
    one expression, the line was parsed again in every reason (one plan too large for Spark to
    compile, so each row was interpreted), which made the check cost three times the staging of
    its changes (10,000 stream changes: bench/apply_cost.py's hot case, docs/performance.md)."""
    line, keys, item_keys = (f"`{c}`" for c in (_LINE, _KEYS, _ITEM_KEYS))
    # Every key, a string one too: its check also refuses `Keys` that the item's own parse
    # (``parse_item``) cannot read though the plain map of "no Keys" can (`{"S": "a", "BOOL": 1}`).
    typed_keys = key_types(table, current)
    checks = [
        (
            "get_json_object(value, '$') is null or ltrim(value) not like '{%'",
            "not a JSON object",
        ),
        (f"{line}.Keys is null or {keys} is null", "no Keys"),
        *[
            (
                f"element_at(element_at({keys}, {sql_string(k.name)}), '{k.descriptor}') is null",
                f"Keys lacks {k.name!r} of type {k.descriptor}",
            )
            for k in table.keys
        ],
        *[
            (
                f"{typed(f'{item_keys}[{sql_string(name)}]', column)} is null",
                f"Keys' {name!r} is not a value its {column.sql()} column holds",
            )
            for name, column in typed_keys.items()
        ],
        (
            f"coalesce({line}.eventName, '') not in ('INSERT', 'MODIFY', 'REMOVE')",
            "eventName is not INSERT, MODIFY or REMOVE",
        ),
        (
            f"{line}.eventName in ('INSERT', 'MODIFY') and {line}.NewImage is null",
            "no NewImage (the stream's view type must be NEW_IMAGE or NEW_AND_OLD_IMAGES)",
        ),
        (
            f"not {creation_time_valid(f'{line}.ApproximateCreationDateTime')}",
            "no valid ApproximateCreationDateTime",
        ),
        (
            f"coalesce({line}.SequenceNumber, '') not rlike '^[0-9]{{1,40}}$'",
            "no valid SequenceNumber",
        ),
    ]
    cases = " ".join(f"when {test} then {sql_string(reason)}" for test, reason in checks)
    parsed = lines.withColumn(
        _LINE,
        F.expr(
            "from_json(value, 'eventName string, Keys string, NewImage string, "
            "ApproximateCreationDateTime string, SequenceNumber string')"
        ),
    ).withColumn(_KEYS, F.expr(f"from_json({line}.Keys, 'map<string, map<string, string>>')"))
    if typed_keys:
        parsed = parsed.withColumn(_ITEM_KEYS, F.expr(parse_item(f"{line}.Keys")))
    checked = parsed.withColumn("_reject", F.expr(f"case {cases} end"))
    return checked.drop(_LINE, _KEYS, _ITEM_KEYS)


def rejected_lines(classified: DataFrame) -> DataFrame:
    """The rejected lines of ``classified`` (``value``, ``_reject``, ``_file``, ``_id``) with
    their 1-based line number in their file. A change file is gzip'd, so Spark reads it whole in
    one partition, in order: a line's number is its id minus its file's first id, plus one."""
    first = F.min("_id").over(Window.partitionBy("_file"))
    return (
        classified.withColumn("line", F.col("_id") - first + 1)
        .where(F.col("_reject").isNotNull())
        .select(
            F.col("_file").alias("file"),
            "line",
            F.col("_reject").alias("reason"),
            F.col("value").alias("raw"),
        )
    )


def record_rejects(spark: SparkSession, table: str, rejects: DataFrame, batch_id: str) -> None:
    """Add the rejected lines to ``staging.<table>_rejects``, once per file and line."""
    name = names.rejects_table(table)
    spark.sql(
        f"create table if not exists {name} (file string, line bigint, reason string, "
        "raw string, batch_id string, rejected_at timestamp) using iceberg "
        "tblproperties ('format-version'='2', 'commit.retry.num-retries'='10')"
    )
    # A view of its own per table: a watch stages several tables at once (ingestion.jobs.watch).
    view = f"lakehouse_new_rejects_{hashlib.sha256(table.encode()).hexdigest()[:12]}"
    rejects.withColumn("batch_id", F.lit(batch_id)).withColumn(
        "rejected_at", F.current_timestamp()
    ).createOrReplaceTempView(view)
    spark.sql(
        f"merge into {name} as t using {view} as s "
        "on t.file = s.file and t.line = s.line when not matched then insert *"
    )
