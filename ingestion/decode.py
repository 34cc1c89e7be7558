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
# One attribute value: every type descriptor as a field, so the item is parsed ONCE into
# map<attribute, value> and each column picks its field. M and L stay as their JSON text.
ATTRIBUTE_VALUE = T.StructType(
    [
        T.StructField("S", T.StringType()),
        T.StructField("N", T.StringType()),
        T.StructField("B", T.StringType()),
        T.StructField("BOOL", T.BooleanType()),
        T.StructField("NULL", T.BooleanType()),
        T.StructField("SS", T.ArrayType(T.StringType())),
        T.StructField("NS", T.ArrayType(T.StringType())),
        T.StructField("BS", T.ArrayType(T.StringType())),
        T.StructField("M", T.StringType()),
        T.StructField("L", T.StringType()),
    ]
)
_ATTRIBUTES = T.MapType(T.StringType(), ATTRIBUTE_VALUE)


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
        "_attrs",
        F.from_json(F.col("_image"), _ATTRIBUTES),  # type: ignore[arg-type]  # maps are supported
    )


def _decode(value: Column, attribute: Attribute) -> Column:
    """The typed value of one attribute (null when absent, NULL, or of another type)."""
    kind = attribute.descriptor
    field = value.getField(kind)
    if kind == "B":
        return F.unbase64(field)
    if kind == "BS":
        return F.transform(field, F.unbase64)
    return field.cast(attribute.column_type)


def _column(attribute: Attribute, table: str, required: bool) -> Column:
    value = F.col("_attrs").getItem(attribute.name)
    decoded = _decode(value, attribute)
    where = f"table {table}: attribute {attribute.name!r} "
    absent = value.isNull() | F.coalesce(value.getField("NULL"), F.lit(False))
    checked = F.when(
        ~absent & decoded.isNull(),
        _fail(
            f"{where}is not a {attribute.descriptor} that fits {attribute.column_type} "
            "(fix its type in dbt_project.yml vars.dynamodb_tables) in "
        ),
    )
    if required:
        checked = F.when(absent, _fail(f"{where}(a key) is missing in an item of ")).otherwise(
            checked.otherwise(decoded)
        )
        return checked.alias(attribute.column)
    return checked.otherwise(decoded).alias(attribute.column)


def with_typed_columns(table: TableConfig):
    """The configured attributes as typed columns, keys first and never null."""

    def transform(df: DataFrame) -> DataFrame:
        key_names = {k.name for k in table.keys}
        columns = [_column(a, table.name, a.name in key_names) for a in table.columns]
        return df.select(*columns, "*").drop("_attrs", "_line")

    return transform
