"""``verify``'s first pass: each side's fingerprints (ingestion.maintenance.fingerprints) summed per
bucket of keys, one job, no join of the two sides; the buckets whose sums agree hold equal items,
the others go to the second pass (ingestion.maintenance.verify)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingestion.config.names import quote
from ingestion.maintenance import fingerprints
from ingestion.schema.types import Schema

BUCKETS = 16384  # of keys: at 1M items about 60 items in each
# A "$" no column name has (ingestion.dynamodb.naming), as the fingerprints' own columns.
BUCKET, DIGEST = "fp$bucket", "fp$digest"


def bucketed(frame: DataFrame) -> DataFrame:
    """``frame`` (with the key columns, and a fingerprint when it has one) with its key's
    ``BUCKET`` (one of ``BUCKETS``) and its ``DIGEST`` (key and fingerprint hashed together)."""
    keys = ", ".join(quote(k) for k in fingerprints.key_names(frame))
    added = [F.expr(f"cast(pmod(xxhash64({keys}), {BUCKETS}) as int)").alias(BUCKET)]
    if fingerprints.FINGERPRINT in frame.columns:
        added.append(F.expr(f"xxhash64({keys}, {quote(fingerprints.FINGERPRINT)})").alias(DIGEST))
    return frame.select("*", *added)


def proved(
    spark: SparkSession,
    paths: list[str],
    items: DataFrame,
    changed: DataFrame,
    schema: Schema,
    held_schema: Schema,
    instant: int,
) -> tuple[int, list[int]]:
    """The items proved equal by their fingerprints (counted), and the buckets the second pass
    reads. Each side is summed per bucket of keys (a count and the sum of each item's digest,
    its key and fingerprint hashed together), one job, no join: a bucket whose sums agree on
    both sides holds equal items (but for a hash collision). A bucket is read again when its
    sums differ, when a final row of it was written after the instant or a staged change of
    it is later than the instant (the change log decides what it held then). ``held_schema``:
    the final table's side (its own columns, ``verify.final_side_schema``)."""
    exported = fingerprints.export_fingerprints(
        fingerprints.read_export(spark, paths, schema), schema
    )
    held = fingerprints.final_fingerprints(items, held_schema, "_version")
    sums = [F.count(F.lit(1)).alias("items")] + [
        F.sum(half).alias(name)
        for name, half in (
            ("low", F.col(DIGEST).bitwiseAND(0xFFFFFFFF)),
            ("high", F.shiftrightunsigned(F.col(DIGEST), 32)),
        )
    ]
    later = F.max(F.col("_version") > instant).alias("later")
    summary = (
        bucketed(exported)
        .groupBy(BUCKET)
        .agg(*sums, F.lit(False).alias("later"))
        .withColumn("side", F.lit("export"))
        .unionByName(
            bucketed(held).groupBy(BUCKET).agg(*sums, later).withColumn("side", F.lit("final"))
        )
    )
    sides: dict[str, dict[int, tuple]] = {"export": {}, "final": {}}
    for r in summary.collect():  # at most BUCKETS rows a side
        sides[r["side"]][r[BUCKET]] = (r["items"], r["low"], r["high"], r["later"])
    exported_sums, held_sums = sides["export"], sides["final"]
    changed_keys = bucketed(changed.select(*fingerprints.final_keys(schema)))
    changed_buckets = {r[0] for r in changed_keys.select(BUCKET).distinct().collect()}
    unsure = [
        b
        for b in set(exported_sums) | set(held_sums)
        if b in changed_buckets
        or b not in exported_sums
        or b not in held_sums
        or exported_sums[b][:3] != held_sums[b][:3]
        or held_sums[b][3]
    ]
    chosen = set(unsure)
    equal = sum(v[0] for b, v in exported_sums.items() if b not in chosen)
    return equal, sorted(unsure)
