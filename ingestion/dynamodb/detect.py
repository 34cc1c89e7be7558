"""Schema detection: one distributed pass over EVERY item, then the type rules (ingestion.dynamodb.types).

Each item becomes its nodes (every value, nested ones included, with path, type and number digits);
Spark aggregates them by (path, type). Only that summary reaches the driver: one row per distinct
path and type, bounded per attribute (an attribute with more distinct nested paths than
``MAX_PATHS`` is a dictionary, kept as JSON text, and only its top level is collected).
"""

from __future__ import annotations

import logging
import time

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from ingestion.dynamodb import decode, type_rules, types
from ingestion.dynamodb.numbers import fits_long, number_digits
from ingestion.dynamodb.tables import TableConfig
from ingestion.dynamodb.values import descriptor, expand_values
from ingestion.sources import manifest

log = logging.getLogger(__name__)

MAX_PATHS = 2000  # distinct nested paths per attribute collected to the driver


def statistics(images: DataFrame) -> type_rules.Stats:
    """Detection statistics of the items in ``images`` (a column ``_attrs``: map<name, VALUE>)."""
    observation = Observation("items")
    every_value = (
        images.select("_attrs")
        .observe(observation, F.count(F.lit(1)).alias("items"))
        .select(F.explode("_attrs").alias("name", "value"))
        .transform(expand_values)
        # One row per value, and one per element of a number set (its digits count too).
        .select("path", "value", F.posexplode_outer("value.NS").alias("position", "element"))
    )
    number = F.coalesce(F.col("value.N"), F.col("element"))
    integer, fraction = number_digits("number")
    summary = (
        every_value.select(
            "path",
            F.expr(descriptor("value")).alias("type"),
            F.coalesce(F.col("position"), F.lit(0)).alias("position"),
            number.alias("number"),
        )
        .groupBy("path", "type")
        .agg(
            F.count(F.when(F.col("position") == 0, 1)).alias("count"),
            F.max(F.expr(integer)).alias("integer_digits"),
            F.max(F.expr(fraction)).alias("fraction_digits"),
            F.expr(f"bool_and(case when number is not null then {fits_long('number')} end)").alias(
                "fits_long"
            ),
        )
        .persist()
    )
    try:
        widths = (
            summary.groupBy(F.col("path")[0].alias("attribute"))
            .agg(F.countDistinct("path").alias("paths"))
            .where(F.col("paths") > MAX_PATHS)
            .limit(10_000)
            .collect()
        )
        wide = {row["attribute"]: row["paths"] for row in widths}
        kept = summary.where((F.size("path") == 1) | ~F.col("path")[0].isin(list(wide)))
        rows = kept.collect()  # the per-path summary: small by construction
    finally:
        summary.unpersist()
    items = int(observation.get.get("items", 0))
    by_path: dict[type_rules.Path_, dict[str, type_rules.NodeStats]] = {}
    for row in rows:
        by_path.setdefault(tuple(row["path"]), {})[row["type"]] = type_rules.NodeStats(
            count=row["count"],
            integer_digits=row["integer_digits"],
            fraction_digits=row["fraction_digits"],
            fits_long=row["fits_long"],
        )
    return type_rules.Stats(items, by_path, wide)


def export_images(spark: SparkSession, export: manifest.Export) -> DataFrame:
    lines = spark.read.text([str(f.path) for f in export.files])
    return lines.transform(decode.with_envelope).transform(decode.with_image)


def detect_export(
    spark: SparkSession,
    export: manifest.Export,
    table: TableConfig,
    overrides: dict | None = None,
) -> types.Schema:
    """Detect the schema of ``table`` from every item of ``export``."""
    return detect_images(export_images(spark, export), table, overrides, export.export_arn)


def stream_images(lines: DataFrame) -> DataFrame:
    """The images of stream change-file lines (``value``; a REMOVE's OldImage or Keys
    included)."""
    return lines.transform(decode.with_envelope).transform(decode.with_image)


def detect_images(
    images: DataFrame, table: TableConfig, overrides: dict | None, source: str
) -> types.Schema:
    """Detect the schema of ``table`` from every image in ``images``."""
    started = time.monotonic()
    stats = statistics(images)
    detected = type_rules.resolve(
        table.name, stats, table.key_descriptors, overrides, source=source
    )
    log.info(
        "%s: schema detected from %d items (%d attributes, %d conflicts) in %.1fs",
        table.name,
        stats.items,
        len(detected.attributes),
        len(detected.conflicts),
        time.monotonic() - started,
    )
    return detected


def detect_unconfigured(spark: SparkSession, export: manifest.Export) -> types.Schema:
    """The schema of an export whose table is not configured: no declared keys, no overrides."""
    stats = statistics(export_images(spark, export))
    return type_rules.resolve(export.table_name, stats, {}, None, source=export.export_arn)
