"""DynamoDB JSON lines -> typed, flattened columns, with Spark's own functions only.

Every line is parsed once against an explicit envelope schema (no inference). The item image is
read as ``map<attribute, raw JSON of its value>``, and each configured attribute is decoded from
its type descriptor. A value that cannot be decoded as configured stops the job with an error
naming the file (``raise_error`` fails the write, so nothing is committed): never a silent null.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingestion.tables import Attribute, TableConfig

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
    ]
)
_ATTRIBUTES = T.MapType(T.StringType(), T.StringType())
_NULL_VALUE = '{"NULL":true}'


def with_envelope(df: DataFrame) -> DataFrame:
    """``value`` (one line of text) -> ``_line`` (the parsed envelope) and ``_source_file``."""
    return df.select(
        F.from_json(F.col("value"), ENVELOPE).alias("_line"),
        F.input_file_name().alias("_source_file"),
    )


def _fail(message: str) -> Column:
    return F.raise_error(F.concat(F.lit(message), F.col("_source_file")))


def with_image(df: DataFrame) -> DataFrame:
    """``_image``: the item's DynamoDB JSON (full export ``Item``), ``_attrs``: it as a map."""
    image = F.coalesce(F.col("_line.Item"), F.col("_line.NewImage"))
    checked = F.when(
        F.col("_line").isNull() | image.isNull(),
        _fail("a line is not a DynamoDB JSON item (no Item or NewImage) in "),
    ).otherwise(image)
    return df.withColumn("_image", checked).withColumn(
        "_attrs", F.from_json(F.col("_image"), _ATTRIBUTES)
    )


def _decode(raw: Column, attribute: Attribute) -> Column:
    """The typed value of one attribute from its raw DynamoDB JSON (null when absent or NULL)."""
    kind = attribute.descriptor
    if kind == "B":
        return F.unbase64(F.get_json_object(raw, "$.B"))
    if kind in ("SS", "NS", "BS"):
        schema = T.StructType([T.StructField(kind, T.ArrayType(T.StringType()))])
        values = F.from_json(raw, schema)[kind]
        return F.transform(values, F.unbase64) if kind == "BS" else values.cast(attribute.column_type)
    # S, N, BOOL; M and L come back as the DynamoDB JSON text of their content.
    return F.get_json_object(raw, f"$.{kind}").cast(attribute.column_type)


def _column(attribute: Attribute, table: str, required: bool) -> Column:
    raw = F.col("_attrs").getItem(attribute.name)
    value = _decode(raw, attribute)
    where = f"table {table}: attribute {attribute.name!r} "
    absent = raw.isNull() | (raw == F.lit(_NULL_VALUE))
    checks = F.when(
        ~absent & value.isNull(),
        _fail(
            f"{where}is not a {attribute.descriptor} that fits {attribute.column_type} "
            "(fix its type in dbt_project.yml vars.dynamodb_tables) in "
        ),
    )
    if required:
        checks = F.when(absent, _fail(f"{where}(a key) is missing in an item of ")).otherwise(
            checks.otherwise(value)
        )
        return checks.alias(attribute.column)
    return checks.otherwise(value).alias(attribute.column)


def with_typed_columns(table: TableConfig):
    """The configured attributes as typed columns, keys first and never null."""

    def transform(df: DataFrame) -> DataFrame:
        key_names = {k.name for k in table.keys}
        columns = [_column(a, table.name, a.name in key_names) for a in table.columns]
        return df.select(*columns, "*").drop("_attrs", "_line")

    return transform
