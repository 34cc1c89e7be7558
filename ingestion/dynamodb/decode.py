"""A DynamoDB JSON line's envelope and change columns, with Spark's own functions only.

Every line is parsed once against an explicit envelope schema (``ENVELOPE``, no inference); its
image (``_image``: a full export's ``Item``; an incremental or stream line's ``NewImage``, else
``OldImage``, else ``Keys``) becomes ``map<attribute, VALUE>`` (``ingestion.dynamodb.values``);
and the change columns are derived: ``_operation``, ``_version`` and, for a stream change,
``_sequence`` (the order rules of ``change_order``). Turning the image into the schema's typed
columns, with drift flagged, is the decoder's (``ingestion.schema.typed_rows``, decision 0013).

A line that cannot be a change stops the batch instead (``fail``: ``raise_error`` fails the
write, nothing is committed), with a message naming its file: no image, no valid
``WriteTimestampMicros``, ``ApproximateCreationDateTime``, ``SequenceNumber`` or ``eventName``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingestion.dynamodb.change_order import DELETE, SNAPSHOT, TTL_DELETE
from ingestion.dynamodb.values import (
    parse_item,
    sql_string,
)

ENVELOPE = T.StructType(
    [
        T.StructField("Item", T.StringType()),
        T.StructField("Keys", T.StringType()),
        T.StructField("NewImage", T.StringType()),
        T.StructField("OldImage", T.StringType()),
        T.StructField(
            "Metadata",
            T.StructType(
                [
                    T.StructField(
                        "WriteTimestampMicros", T.StructType([T.StructField("N", T.StringType())])
                    )
                ]
            ),
        ),
        # Stream change files (ingestion.sources.change_file_writer) only; null in export lines.
        T.StructField("SequenceNumber", T.StringType()),
        T.StructField("ApproximateCreationDateTime", T.StringType()),  # the number's text
        T.StructField("eventName", T.StringType()),
        T.StructField(
            "userIdentity",
            T.StructType(
                [
                    T.StructField("type", T.StringType()),
                    T.StructField("principalId", T.StringType()),
                ]
            ),
        ),
    ]
)
TTL_PRINCIPAL = "dynamodb.amazonaws.com"


def with_envelope(df: DataFrame) -> DataFrame:
    """``value`` (one line of text) -> ``value``, ``_line`` (the parsed envelope) and
    ``_source_file``. Spark parses only the envelope's fields a query takes: staging's decoder
    takes the image from ``value`` itself (``typed_rows``)."""
    return df.select(
        "value",
        F.from_json(F.col("value"), ENVELOPE).alias("_line"),
        F.input_file_name().alias("_source_file"),
    )


def fail(message: str) -> str:
    """A SQL expression that fails the batch with ``message`` and the line's file."""
    return f"raise_error(concat({sql_string(message)}, _source_file))"


IMAGES = ("Item", "NewImage", "OldImage", "Keys")  # a line's image: the first of these present
NOT_AN_ITEM = "a line is not a DynamoDB JSON item (no Item, NewImage, OldImage or Keys) in "


def with_image(df: DataFrame) -> DataFrame:
    """``_image``: the DynamoDB JSON the row carries (a full export's ``Item``; an incremental
    line's ``NewImage``, or for a delete its ``OldImage`` or else its ``Keys``); ``_attrs``: it
    as a map."""
    image = f"coalesce({', '.join(f'`_line`.{name}' for name in IMAGES)})"
    checked = F.expr(
        f"case when `_line` is null or {image} is null then {fail(NOT_AN_ITEM)} else {image} end"
    )
    return df.withColumn("_image", checked).withColumn("_attrs", F.expr(parse_item("_image")))


def change_columns(
    full: bool, version_micros: int, new_image_only: bool
) -> tuple[F.Column, F.Column]:
    """(``_operation``, ``_version``) of a line. Full export: ``snapshot`` at the export time.
    Incremental: insert (NewImage only), update (both), delete (OldImage or Keys only), or
    ``upsert`` for a NEW_IMAGE export's NewImage, at ``version_micros``: the end of the export's
    window (``manifest.Export.version_micros``), not the line's ``WriteTimestampMicros``. A
    stream change's version is only an upper bound of its write time (the end of its second),
    so a stream change written in the same second before the export's last write of the item
    would beat the write time; it never beats the window's end unless it was made at or after
    it. ``WriteTimestampMicros`` is still checked: a line without it is damaged."""
    if full:
        return F.lit(SNAPSHOT), F.lit(version_micros).cast("bigint")
    written_new = "'upsert'" if new_image_only else "'insert'"
    operation = F.expr(
        f"case when `_line`.NewImage is null then '{DELETE}' "
        f"when `_line`.OldImage is not null then 'update' else {written_new} end"
    )
    written = "`_line`.Metadata.WriteTimestampMicros.N"
    version = F.expr(
        f"case when {written} rlike '^[0-9]{{1,18}}$' then cast({version_micros} as bigint) else "
        f"{fail('a change has no valid Metadata.WriteTimestampMicros in ')} end"
    )
    return operation, version


# ApproximateCreationDateTime as Spark reads it from a change file: the writer's integer or exact
# decimal text, or a JSON float that Spark renders in scientific notation (``1.7672256E9``).
CREATION_TIME_FORM = "^[0-9]{1,11}([.][0-9]+)?([eE][+]?[0-9]{1,2})?$"


def creation_seconds(created: str) -> str:
    """The creation time (SQL text ``created``) as exact decimal seconds; null if not a number."""
    return (
        f"case when {created} rlike '{CREATION_TIME_FORM}' "
        f"then cast({created} as decimal(38, 12)) end"
    )


def creation_time_valid(created: str) -> str:
    """True when ``created`` is a time in epoch seconds (what the rejects check uses too)."""
    return f"coalesce({creation_seconds(created)} between 0 and 99999999999, false)"


def creation_version(seconds: str) -> str:
    """The version of a stream change: the END of its second (whole seconds) or of its
    millisecond (fractional ones), in microseconds: never older than an export's snapshot of the
    same moment. ``change_order.stream_version`` is the same rule in Python."""
    return (
        f"case when {seconds} = floor({seconds}) then cast({seconds} as bigint) * 1000000 + 999999 "
        f"else cast(floor({seconds} * 1000) as bigint) * 1000 + 999 end"
    )


def stream_change_columns() -> tuple[F.Column, F.Column, F.Column]:
    """(``_operation``, ``_version``, ``_sequence``) of a stream change-file line.

    ``eventName`` decides the operation: INSERT -> insert, MODIFY -> update, REMOVE -> delete,
    or ``ttl_delete`` when DynamoDB's TTL removed the item (``userIdentity.principalId`` is
    ``dynamodb.amazonaws.com``). ``ApproximateCreationDateTime`` is rounded down to the second
    (or millisecond), so the version is the END of that second in microseconds: an upper bound of
    the write time, never older than an export's snapshot of that same second (a change must
    never lose to a snapshot taken before it). Within one version ``_sequence`` (the
    SequenceNumber, zero-padded to 40 digits so text order is number order) orders changes."""
    line = "`_line`"
    event = f"{line}.eventName"
    ttl = (
        f"{line}.userIdentity.principalId = {sql_string(TTL_PRINCIPAL)} "
        f"and {line}.userIdentity.type = 'Service'"
    )
    no_image = fail(
        "a stream change without NewImage (the stream's view type must be NEW_IMAGE or "
        "NEW_AND_OLD_IMAGES) in "
    )
    operation = F.expr(
        f"case when {event} = 'REMOVE' then (case when {ttl} then '{TTL_DELETE}' else '{DELETE}' "
        f"end) "
        f"when {event} in ('INSERT', 'MODIFY') and {line}.NewImage is null then {no_image} "
        f"when {event} = 'INSERT' then 'insert' when {event} = 'MODIFY' then 'update' "
        f"else {fail('a stream change whose eventName is not INSERT, MODIFY or REMOVE in ')} end"
    )
    version = F.expr(
        f"case when {creation_time_valid(f'{line}.ApproximateCreationDateTime')} then "
        f"{creation_version(creation_seconds(f'{line}.ApproximateCreationDateTime'))} "
        f"else {fail('a stream change without a valid ApproximateCreationDateTime in ')} end"
    )
    number = f"{line}.SequenceNumber"
    sequence = F.expr(
        f"case when {number} rlike '^[0-9]{{1,40}}$' then lpad({number}, 40, '0') "
        f"else {fail('a stream change without a valid SequenceNumber in ')} end"
    )
    return operation, version, sequence
