"""Schema detection: one distributed pass over EVERY item, then the type rules
(ingestion.schema.types).

The pass: the shape of the items is learnt from the first ``SAMPLE_ITEMS`` of them, then every
item is parsed once with that shape's type and ONE aggregation computes every (path, type)'s
statistics (ingestion.schema.shapes). The items the shape does not describe (an attribute
first seen later, a new map key, a value of another type) are counted by the generic path, which
a second pass runs over them alone, and the two add up: the same statistics as the generic path
over every item, at the cost of one parse.

The generic path: each item becomes its nodes (every value, nested ones included, with path,
type and number digits); Spark aggregates them by (path, type). Only that summary reaches the
driver: one row per distinct path and type, bounded per attribute (an attribute with more distinct
nested paths than ``MAX_PATHS`` is a dictionary, kept as JSON text, and only its top level is
collected). It serves alone where a shape would not pay: first items with more than
``MAX_SHAPE_PATHS`` paths (a dictionary) or paths deeper in sum than ``MAX_SHAPE_STEPS``, or none.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import replace

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from ingestion.dynamodb import decode
from ingestion.dynamodb.numbers import fits_long, number_digits
from ingestion.dynamodb.tables import TableConfig
from ingestion.dynamodb.values import descriptor, expand_values, parse_item
from ingestion.schema import item_statistics, shapes, type_rules, typed_columns, types
from ingestion.sources import manifest

log = logging.getLogger(__name__)

MAX_PATHS = 2000  # distinct nested paths per attribute collected to the driver
SAMPLE_ITEMS = 1000  # the items the shape is learnt from
MAX_SHAPE_PATHS = 500  # a sample with more paths is detected by the generic path alone
# A shape whose paths are deep is detected by the generic path alone too: a path's column reads
# its whole route from the top, so the pass's expressions grow as the paths' steps summed, and
# Spark's compile of them with it (a list of maps 4 deep: 181 steps, 11 s for four items; 8 deep:
# 1,103 steps, out of a 1 GB heap). The generic path walks any depth in a loop of fixed size
# (5.4 s at 6 deep, 5.7 s at 10). `books` and `orders` have 8 and 10.
MAX_SHAPE_STEPS = 120


def statistics(frame: DataFrame) -> type_rules.Stats:
    """Detection statistics of every item of ``frame``: lines of exports or change files
    (``value``), or images (``_image``). One pass with the shape of the first items; the generic
    path for the items that shape misses."""
    text = "value" if "value" in frame.columns else "_image"
    first = [row[0] for row in frame.select(text).limit(SAMPLE_ITEMS).collect()]
    top = shapes.from_items(_sample_items(first, text == "value"))
    if not top or shapes.size(top) > MAX_SHAPE_PATHS or shapes.steps(top) > MAX_SHAPE_STEPS:
        return generic_statistics(_attributes(frame))
    flagged, plan = shapes.flagged(frame, top)
    items, misfits, by_path = shapes.statistics(flagged, plan)
    if not misfits:
        return type_rules.Stats(items, by_path)
    log.info(
        "%d of %d items not of the first items' shape: the generic path counts them", misfits, items
    )
    rest = generic_statistics(_attributes(flagged.where(shapes.MISFIT).select(text)))
    return _added(items, by_path, rest)


def _sample_items(texts: list[str], lines: bool) -> list[dict]:
    items = []
    for text in texts:
        try:
            parsed = json.loads(text)
        except (TypeError, ValueError):
            continue  # the pass reports it (a line that is not an item) or flags it
        if lines and isinstance(parsed, dict):
            parsed = next((parsed[k] for k in decode.IMAGES if parsed.get(k) is not None), None)
        if isinstance(parsed, dict):
            items.append(parsed)
    return items


def _attributes(frame: DataFrame) -> DataFrame:
    """``frame``'s items as ``_attrs`` (map<name, VALUE>), the generic path's input."""
    if "value" in frame.columns:
        return frame.transform(decode.with_envelope).transform(decode.with_image).select("_attrs")
    return frame.select(F.expr(parse_item("`_image`")).alias("_attrs"))


def _added(
    items: int,
    by_path: dict[type_rules.Path_, dict[str, type_rules.NodeStats]],
    rest: type_rules.Stats,
) -> type_rules.Stats:
    """The statistics of two disjoint sets of items together (``by_path`` and ``rest``)."""
    merged = {path: dict(seen) for path, seen in by_path.items()}
    for path, seen in rest.by_path.items():
        for kind, node in seen.items():
            mine = merged.setdefault(path, {}).get(kind)
            merged[path][kind] = node if mine is None else _sum(mine, node)
    paths: dict[str, int] = {}
    for path in merged:
        paths[str(path[0])] = paths.get(str(path[0]), 0) + 1
    wide = {a: n for a, n in paths.items() if n > MAX_PATHS} | rest.wide
    kept = {p: t for p, t in merged.items() if len(p) == 1 or str(p[0]) not in wide}
    return type_rules.Stats(items, kept, wide)


def _sum(a: type_rules.NodeStats, b: type_rules.NodeStats) -> type_rules.NodeStats:
    def most(x, y):
        return y if x is None else x if y is None else max(x, y)

    fits = (
        b.fits_long
        if a.fits_long is None
        else a.fits_long
        if b.fits_long is None
        else a.fits_long and b.fits_long
    )
    return type_rules.NodeStats(
        a.count + b.count,
        most(a.integer_digits, b.integer_digits),
        most(a.fraction_digits, b.fraction_digits),
        fits,
    )


def generic_statistics(images: DataFrame) -> type_rules.Stats:
    """Detection statistics of the items in ``images`` (a column ``_attrs``: map<name, VALUE>)."""
    observation = Observation(
        f"items {uuid.uuid4().hex}"
    )  # a name of its own: tables detect at once (watch)
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
    """The export's lines (``value``): what ``statistics`` detects from."""
    return spark.read.text([str(f.path) for f in export.files])


def detect_export(
    spark: SparkSession,
    export: manifest.Export,
    table: TableConfig,
    overrides: dict | None = None,
) -> types.Schema:
    """Detect the schema of ``table`` from every item of ``export``."""
    return detect_images(export_images(spark, export), table, overrides, export.export_arn)


def stream_images(lines: DataFrame) -> DataFrame:
    """Stream change-file lines (``value``): ``statistics`` takes each one's image (a REMOVE's
    OldImage or Keys included)."""
    return lines.select("value")


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


def first_items_schema(
    images: DataFrame, table: TableConfig, overrides: dict | None, source: str
) -> types.Schema | None:
    """The types of the first ``SAMPLE_ITEMS`` items of ``images``, to be proven on every item
    by the pass that stages them (``types.Schema.sampled``); None where that pass could not
    prove them: no items, more attributes than the typed decode takes (``typed_columns``) or
    more paths than a shape (``MAX_SHAPE_PATHS``), or a
    path whose text type stands only for what was not seen (only empty maps or lists: a later
    non-empty one would be a struct or an array, yet fit text), or text holding maps or lists
    below the top (``_unprovable``)."""
    stats = _first_statistics(images)
    if not stats.items:
        return None
    detected = type_rules.resolve(
        table.name, stats, table.key_descriptors, overrides, source=source
    )
    if (
        len(detected.attributes) > typed_columns.TYPED_ATTRIBUTES
        or len(stats.by_path) > MAX_SHAPE_PATHS
    ):
        return None  # a check per path of a wide item would swell the generated code it shares
    if any(_unprovable(a.info) for a in detected.attributes):
        return None
    log.info(
        "%s: types of the first %d items (%d attributes), checked on every item as it is staged",
        table.name,
        stats.items,
        len(detected.attributes),
    )
    return replace(detected, sampled=stats.items)


def _first_statistics(images: DataFrame) -> type_rules.Stats:
    """The statistics of the first ``SAMPLE_ITEMS`` items of ``images``: counted in the driver
    (``item_statistics``, milliseconds against seconds of planning a Spark pass), by Spark
    where one of them is not DynamoDB JSON as DynamoDB writes it."""
    text = "value" if "value" in images.columns else "_image"
    first = [row[0] for row in images.select(text).limit(SAMPLE_ITEMS).collect()]
    counted = item_statistics.of_texts(first, text == "value", MAX_PATHS)
    return counted if counted is not None else statistics(images.limit(SAMPLE_ITEMS))


def _unprovable(info: dict, nested: bool = False) -> bool:
    """A path (or one below it) whose type the staging pass could not prove: text standing for
    maps or lists not seen yet (only empty ones), or, below the top, text holding maps or lists,
    whose keys staging never looks at but which count towards their attribute's ``MAX_PATHS``
    (more of them would make the whole attribute text)."""
    note = str(info.get("note", ""))
    if note.startswith(("only empty maps", "only empty lists")):
        return True
    if nested and note and {"M", "L"} & set(info.get(type_rules.DETECTED_MARK) or {}):
        return True
    below = [*(info.get("fields") or {}).values(), info.get("element")]
    return any(_unprovable(b, nested=True) for b in below if isinstance(b, dict) and b)


def detect_unconfigured(spark: SparkSession, export: manifest.Export) -> types.Schema:
    """The schema of an export whose table is not configured: no declared keys, no overrides."""
    stats = statistics(export_images(spark, export))
    return type_rules.resolve(export.table_name, stats, {}, None, source=export.export_arn)
