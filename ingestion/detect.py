"""Schema detection: one distributed pass over EVERY item, then the type rules (ingestion.schema).

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

from ingestion import decode, manifest, schema
from ingestion.tables import TableConfig
from ingestion.values import nodes_sql

log = logging.getLogger(__name__)

MAX_PATHS = 2000  # distinct nested paths per attribute collected to the driver


def statistics(images: DataFrame) -> schema.Stats:
    """Detection statistics of the items in ``images`` (a column ``_attrs``: map<name, VALUE>)."""
    observation = Observation("items")
    nodes = (
        images.select("_attrs")
        .observe(observation, F.count(F.lit(1)).alias("items"))
        .select(F.explode(F.expr(nodes_sql("`_attrs`"))).alias("node"))
        .select("node.*")
    )
    summary = (
        nodes.groupBy("path", "type")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.max("integer_digits").alias("integer_digits"),
            F.max("fraction_digits").alias("fraction_digits"),
            F.expr("bool_and(fits_long)").alias("fits_long"),
            F.max("size").alias("max_size"),
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
    by_path: dict[schema.Path_, dict[str, schema.NodeStats]] = {}
    for row in rows:
        by_path.setdefault(tuple(row["path"]), {})[row["type"]] = schema.NodeStats(
            count=row["count"],
            integer_digits=row["integer_digits"],
            fraction_digits=row["fraction_digits"],
            fits_long=row["fits_long"],
            max_size=row["max_size"],
        )
    return schema.Stats(items, by_path, wide)


def export_images(spark: SparkSession, export: manifest.Export) -> DataFrame:
    lines = spark.read.text([str(f.path) for f in export.files])
    return lines.transform(decode.with_envelope).transform(decode.with_image)


def detect_export(
    spark: SparkSession,
    export: manifest.Export,
    table: TableConfig,
    overrides: dict | None = None,
) -> schema.Schema:
    """Detect the schema of ``table`` from every item of ``export``."""
    started = time.monotonic()
    stats = statistics(export_images(spark, export))
    detected = schema.resolve(
        table.name, stats, table.key_descriptors, overrides, source=export.export_arn
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
