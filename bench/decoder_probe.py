"""Staging's decode in Spark SQL beside a decoder in the JVM (a probe), in one run and one process:
the measurement behind decision 0013.

One full export of ``--items`` `orders` items is written and ingested (not timed: the types are
detected and stored). Then, each warm (one untimed run first, the best of two timed), every row
built and dropped (``noop``), 1 GB driver heap:

- the floor: Spark's JSON reader parsing each line with the export's own typed schema (inferred
  beforehand, not timed), building every value;
- staging's decode as `ingest` runs it (``append.read_export``: the envelope, the item parsed as
  ``map<attribute, VALUE>`` and typed, every typed column, ``_rest`` and ``_drift``);
- the probe (bench/probes/DecodeProbe.java, compiled here with the JDK's ``javac`` against
  PySpark's jars): one streaming pass over each line to the same typed columns, ``_rest`` and
  ``_drift``, as a Java UDF.

Then both outputs are compared: the typed columns and ``_rest`` of every row, both ways
(``exceptAll``), must be equal, and the rows with a remainder are counted in each.

Usage: .venv/bin/python bench/decoder_probe.py [--items 1000000]
Writes bench/results/decoder_probe.json.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import project
import results_file  # bench/ is on sys.path when a benchmark runs as a script

PROBE = Path(__file__).resolve().parent / "probes" / "DecodeProbe.java"


def compiled_probe(scratch: Path) -> Path:
    """The probe's jar, compiled against PySpark's own jars."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    classes = scratch / "classes"
    classpath = os.pathsep.join(glob.glob(str(jars / "*.jar")))
    subprocess.run(["javac", "-cp", classpath, "-d", str(classes), str(PROBE)], check=True)
    jar = scratch / "probe.jar"
    subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "."], check=True)
    return jar


def best_noop(frame: Any, runs: int = 2) -> float:
    """The best of ``runs`` timed ``noop`` writes, after one untimed."""
    frame.write.format("noop").mode("overwrite").save()
    times = []
    for _ in range(runs):
        began = time.monotonic()
        frame.write.format("noop").mode("overwrite").save()
        times.append(time.monotonic() - began)
    return round(min(times), 1)


def one_parse(lines: Any, schema: Any) -> dict[str, float]:
    """What one parse of the item in Spark SQL would cost (``noop``, each warm): the envelope
    with the item as text; then the item as staging parses it today, ``map<attribute, VALUE>``
    and typed for the nested attributes; then instead once, as one struct of every attribute
    (each with its layout), with its keys (``json_object_keys``, for attributes the schema
    lacks)."""
    from pyspark.sql import functions as F

    from ingestion.dynamodb import decode
    from ingestion.dynamodb.values import sql_string
    from ingestion.schema.typed_columns import layout, typed_attributes_ddl

    items = lines.transform(decode.with_envelope).transform(decode.with_image)
    attributes = [a for a in schema.attributes]
    nested = typed_attributes_ddl([(a.name, a.type) for a in attributes if not a.key])
    every = ",".join(f"`{a.name}`:{layout([a.type]).value_ddl()}" for a in attributes)
    return {
        "the envelope, the item as text": best_noop(items.select("_image")),
        "+ the item as map<attribute, VALUE>": best_noop(items.select("_image", "_attrs")),
        "+ typed for the nested attributes (staging today)": best_noop(
            items.select("_attrs", F.expr(f"from_json(_image, {sql_string(nested or '')})"))
        ),
        "instead: one struct of every attribute + its keys": best_noop(
            items.select(
                F.expr(f"from_json(_image, {sql_string(f'struct<{every}>')})"),
                F.expr("json_object_keys(_image)"),
            )
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="lakehouse-bench-decoder-"))
    jar = compiled_probe(scratch)
    os.environ.update(
        SPARK_LOCAL_IP="127.0.0.1",
        LAKEHOUSE_DRIVER_MEMORY="1g",
        LAKEHOUSE_HOME=str(scratch / "home"),
        # Local mode: the driver's class path is the executors'. Set before the JVM starts.
        PYSPARK_SUBMIT_ARGS=f"--driver-class-path {jar} pyspark-shell",
    )
    try:
        copy = project.copy(scratch / "project", orders_buckets=None)
        shutil.rmtree(copy / "schemas")
        (copy / "schemas").mkdir()  # no schema file: ingest detects the types
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        from ingestion.catalog import table_types
        from ingestion.cli.app import main as cli
        from ingestion.dynamodb.tables import get_table
        from ingestion.dynamodb.values import sql_string
        from ingestion.samples import sample_exports
        from ingestion.sources import manifest
        from ingestion.spark.spark_config import build_spark
        from ingestion.staging import append

        folder = sample_exports.write_samples(scratch / "exports", args.items, 1, ["orders"])[
            "orders"
        ]
        spark = build_spark("bench decoder probe")
        if cli(["ingest", "--table", "orders", str(folder)]) != 0:
            raise SystemExit("decoder_probe: ingest failed")
        schema = table_types.stored_schema(spark, get_table("orders"))
        assert schema is not None
        export = manifest.read_export(folder, verify=False)
        paths = [str(f.path) for f in export.files]
        lines = spark.read.text(paths)
        staged = append.read_export(spark, export, schema, "b", datetime.now(UTC)).drop("_image")
        columns = [a.column for a in schema.attributes]
        typed = T.StructType([staged.schema[c] for c in columns])
        returned = T.StructType(
            [
                *typed.fields,
                T.StructField("_rest", T.StringType()),
                T.StructField("_drift", T.ArrayType(T.StringType())),
                T.StructField("_error", T.StringType()),
            ]
        )
        spark.udf.registerJavaFunction("decode_probe", "DecodeProbe", returned)
        keys = ",".join(a.name for a in schema.attributes if a.key)
        probe = lines.select(
            F.expr(f"decode_probe(value, {sql_string(typed.json())}, {sql_string(keys)})").alias(
                "r"
            )
        ).select("r.*")
        floor_schema = spark.read.json(paths).schema
        floor = best_noop(lines.select(F.from_json("value", floor_schema).alias("line")))
        staging = best_noop(staged)
        probed = best_noop(probe)
        parses = one_parse(lines, schema)
        compared = [*columns, "_rest"]
        differing = (
            staged.select(*compared).exceptAll(probe.select(*compared)).count()
            + probe.select(*compared).exceptAll(staged.select(*compared)).count()
        )
        errors = probe.where("_error is not null").count()
        remainders = {
            "staging": staged.where("_rest is not null").count(),
            "probe": probe.where("_rest is not null").count(),
        }
        if differing or errors:
            raise SystemExit(f"decoder_probe: {differing} rows differ, {errors} probe errors")
        results_file.write(
            "decoder_probe",
            {
                "table": "orders",
                "items": args.items,
                "floor_s": floor,
                "staging_decode_s": staging,
                "probe_decode_s": probed,
                "staging_vs_floor": round(staging / floor, 2),
                "probe_vs_floor": round(probed / floor, 2),
                "staging_vs_probe": round(staging / probed, 1),
                "parses_in_spark_sql_s": parses,
                "rows_differing": differing,
                "rows_with_a_remainder": remainders,
            },
            f".venv/bin/python bench/decoder_probe.py --items {args.items}",
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
