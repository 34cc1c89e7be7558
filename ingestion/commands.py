"""The commands behind ``ddb-lakehouse``: each takes the parsed arguments and returns an exit code."""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import functions as F

from ingestion import (
    catalog,
    manifest,
    onboarding,
    sample,
    sample_stream,
    schema,
    settings,
    spark_config,
    staging,
)
from ingestion.emr import EmrError
from ingestion.glue import GlueError
from ingestion.locations import LocationError
from ingestion.merge import DbtError, MergeCounts
from ingestion.report import format_table, write_rows
from ingestion.streams import StreamError
from ingestion.tables import TableConfig, TableConfigError, get_table, load_tables
from ingestion.watch import WatchError

log = logging.getLogger("ddb-lakehouse")


class SubmitError(RuntimeError):
    """A spark-submit job failed."""


USER_ERRORS = (
    manifest.ExportError,
    staging.StagingError,
    TableConfigError,
    spark_config.ConfigError,
    DbtError,
    SubmitError,
    LocationError,
    WatchError,
    EmrError,
    GlueError,
    StreamError,
    onboarding.OnboardingError,
    schema.SchemaError,
    AnalysisException,
    ParseException,
)


def cmd_init(args: argparse.Namespace) -> int:
    path = catalog.bootstrap(spark_config.spark_conf())
    print(f"catalog ready: {path} (namespaces: {', '.join(catalog.NAMESPACES)})")
    return 0


def cmd_sample(args: argparse.Namespace) -> int:
    out = args.out or settings.lakehouse_home() / "samples"
    folders = sample.write_samples(out, args.items, args.seed, args.table)
    for table, folder in folders.items():
        print(f"{table}: {folder}")
    if "books" in folders:
        items = args.items or sample.SAMPLE_TABLES["books"].default_items
        location = sample_stream.write_books_stream(out, items, args.seed)
        print(f"books (stream change files): {location / 'books'}  (ingest --stream {location})")
    if "orders" in folders and args.incrementals:
        items = args.items or sample.SAMPLE_TABLES["orders"].default_items
        for folder in sample.write_orders_chain(out, items, args.seed, args.incrementals):
            print(f"orders (incremental): {folder}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from ingestion import ledger
    from ingestion.maintenance import health
    from ingestion.merge import MERGE_LOG, ensure_merge_log, final_table, new_batches

    tables = [get_table(t) for t in args.table] if args.table else list(load_tables().values())
    spark = spark_config.build_spark("status")
    ensure_merge_log(spark)
    for table in tables:
        entries = ledger.entries(spark, table.name)
        print(f"{table.name}: {len(entries)} source(s) in the ledger")
        # Every export, and the last few stream batches (a watched table has one per tick).
        streamed = [e for e in entries if e.kind == ledger.STREAM]
        shown = [e for e in entries if e.kind != ledger.STREAM or e in streamed[-5:]]
        print(
            format_table(
                ["committed", "kind", "from", "to", "source"],
                [
                    [
                        e.committed_at[:19],
                        e.kind.replace("_EXPORT", ""),
                        e.start or "",
                        e.end or "",
                        e.source.rsplit("/", 1)[-1]
                        + (f" ({len(e.file_names)} files)" if e.kind == ledger.STREAM else ""),
                    ]
                    for e in shown
                ],
            )
        )
        if len(streamed) > 5:
            files = sum(len(e.file_names) for e in streamed)
            print(f"  ... and {len(streamed) - 5} earlier stream batches ({files} files in all)")
        pending = new_batches(spark, table.name)
        unmerged = (
            spark.table(staging.staging_table(table.name))
            .where(F.col("_batch_id").isin(pending))
            .count()
            if pending
            else 0
        )
        final = (
            spark.table(final_table(table.name)).count()
            if spark.catalog.tableExists(f"lake.lakehouse.{table.name}")
            else 0
        )
        last = max((e.end for e in entries if e.end), default="never")
        print(
            f"  last applied time: {last}; staged rows not merged yet: {unmerged} "
            f"({len(pending)} batch(es)); final rows: {final}  (merge log: {MERGE_LOG})"
        )
        state = health(spark, table.name)
        print(f"  final table: {state}\n" if state else "")
    return 0


def cmd_add_table(args: argparse.Namespace) -> int:
    written = onboarding.add_table(args.name, args.partition_key, args.sort_key, args.buckets)
    print(f"table {args.name} registered; wrote:")
    for path in written:
        print(f"  {path.relative_to(settings.project_dir())}")
    print(f"next: ddb-lakehouse sync --table {args.name} <export-folder>")
    return 0


def _ingest(table: TableConfig, sources: list[str], allow_gap: bool = False) -> int:
    from ingestion.ingest import ingest_export

    spark = spark_config.build_spark(f"ingest {table.name}")
    results = []
    for number, source in enumerate(sources, 1):
        if len(sources) > 1:
            print(f"[{number}/{len(sources)}] {source}", flush=True)
        results.append(ingest_export(spark, table, source, allow_gap))
    print(
        format_table(
            ["table", "source", "staged rows", "manifest items", "status", "seconds"],
            [
                [
                    r.table,
                    r.source.rsplit("/", 1)[-1],
                    r.rows,
                    r.expected,
                    "already ingested"
                    if r.skipped
                    else ("ok" if r.rows == r.expected else "MISMATCH"),
                    f"{r.seconds:.1f}",
                ]
                for r in results
            ],
        )
    )
    for r in results:
        for change in r.schema_changes:
            print(f"{r.table}: {change}")
    drift = [d for r in results for d in r.drift]
    if drift:
        _print_drift(drift)
        print(
            f"{sum(d.rows for d in drift)} value(s) did not fit their column: the rows are staged, "
            "those columns are null and the values are whole in _image. To adopt the new types: "
            f"ddb-lakehouse rebuild --table {table.name}"
        )
    return 0 if all(r.skipped or r.rows == r.expected for r in results) else 1


def _print_drift(drift: list[staging.Drift]) -> None:
    print("schema drift (values that do not fit their column):")
    print(
        format_table(
            ["attribute", "source", "rows", "example value"],
            [[d.attribute, d.source.rsplit("/", 1)[-1], d.rows, d.example[:80]] for d in drift],
        )
    )


def cmd_detect_schema(args: argparse.Namespace) -> int:
    from ingestion import detect
    from ingestion.ingest import declared_keys

    export = manifest.read_export(args.export)
    table = get_table(args.table) if args.table else None
    started = time.monotonic()
    spark = spark_config.build_spark("detect-schema")
    if table is None:
        stats = detect.statistics(detect.export_images(spark, export))
        detected = schema.resolve(export.table_name, stats, {}, None, source=export.export_arn)
    else:
        existing = schema.load_schema(table.name, declared_keys(table))
        detected = detect.detect_export(
            spark, export, table, existing.overrides if existing else None
        )
    seconds = time.monotonic() - started
    print(
        format_table(
            ["attribute", "column", "type", "dynamodb types", "note"],
            [
                [
                    a.name,
                    a.column,
                    a.type.sql() if len(a.type.sql()) <= 60 else a.type.sql()[:57] + "...",
                    ", ".join(f"{t} {n}" for t, n in a.info.get("dynamodb_types", {}).items()),
                    ("key" if a.key else "") + a.info.get("note", ""),
                ]
                for a in detected.attributes
            ],
        ),
        file=sys.stderr if args.output is None and table is None else sys.stdout,
    )
    for conflict in detected.conflicts:
        print(f"conflict: {conflict}", file=sys.stderr)
    rate = (detected.items or 0) / seconds if seconds else 0.0
    print(
        f"{detected.items} items scanned in {seconds:.1f}s ({rate:,.0f} items/s)", file=sys.stderr
    )
    if args.output is None and table is None:
        json.dump(schema.to_json(detected), sys.stdout, indent=2, ensure_ascii=False)
        print()
        return 0
    path = schema.write_schema(detected, args.output)
    print(f"schema written to {path}")
    return 0


def cmd_drift(args: argparse.Namespace) -> int:
    table = get_table(args.table)
    drift = staging.drift_report(spark_config.build_spark("drift"), table.name)
    if not drift:
        print(f"{table.name}: no schema drift: every staged value fits its column")
        return 0
    _print_drift(drift)
    print(f"to adopt the new types: ddb-lakehouse rebuild --table {table.name}")
    return 0


def cmd_rebuild(args: argparse.Namespace) -> int:
    from ingestion.merge import run_merge
    from ingestion.rebuild import rebuild_staging

    table = get_table(args.table)
    spark = spark_config.build_spark(f"rebuild {table.name}")
    rebuilt = rebuild_staging(spark, table)
    print(f"staging.{table.name} rebuilt from _image: {rebuilt.rows} rows")
    for change in rebuilt.changed or ["(no column type changed)"]:
        print(f"  {change}")
    counts, seconds = run_merge(spark, [table], full_refresh=True)
    _print_merge(counts, seconds)
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    table = get_table(args.table)
    if args.stream and args.sources:
        raise TableConfigError("give export folders or --stream, not both")
    if args.stream:
        return _ingest_stream(table, args)
    if not args.sources:
        raise TableConfigError("nothing to ingest: give export folders, or --stream LOCATION")
    return _ingest(table, args.sources, args.allow_gap)


def _ingest_stream(table: TableConfig, args: argparse.Namespace) -> int:
    from ingestion.streams import ingest_stream

    spark = spark_config.build_spark(f"ingest {table.name} stream")
    r = ingest_stream(
        spark, table, args.stream, args.settle, args.max_files, max_rejects=args.max_rejects
    )
    newest = r.newest_change.isoformat() if r.newest_change else "-"
    print(
        f"{r.table}: {r.files} change files staged ({r.changes} changes, newest {newest}) from "
        f"{r.location} in {r.seconds:.1f}s; {r.cleaned} files deleted, {r.pending} left"
        + (f"; {r.rejected} damaged lines in staging.{r.table}_rejects" if r.rejected else "")
    )
    for change in r.schema_changes:
        print(f"{r.table}: {change}")
    if r.drift:
        _print_drift(list(r.drift))
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    from ingestion.watch import WatchOptions, only_watch, watch

    table = get_table(args.table)
    lock = only_watch(settings.lakehouse_home(), table.name)  # held until the process ends
    options = WatchOptions(
        stream=args.stream,
        interval=args.interval,
        ticks=args.ticks,
        settle=args.settle,
        max_files=args.max_files,
        max_rejects=args.max_rejects,
        test_every=args.test_every,
        maintain_every=args.maintain_every,
        max_failures=args.max_failures,
    )
    spark = spark_config.build_spark(f"watch {table.name}")
    watch(spark, table, options, report=lambda line: print(line, flush=True))
    lock.close()
    return 0


def _print_merge(counts: list[MergeCounts], seconds: float) -> None:
    print(
        format_table(
            ["final table", "rows", "inserted", "updated", "deleted"],
            [[f"lakehouse.{c.table}", c.rows, c.inserted, c.updated, c.deleted] for c in counts],
        )
    )
    print(f"merge (dbt run + dbt test): {seconds:.1f}s")


def _merge(tables: list[TableConfig]) -> list[MergeCounts]:
    from ingestion.merge import run_merge

    spark = spark_config.build_spark("merge")
    counts, seconds = run_merge(spark, tables)
    _print_merge(counts, seconds)
    return counts


def cmd_merge(args: argparse.Namespace) -> int:
    tables = [get_table(t) for t in args.table] if args.table else list(load_tables().values())
    _merge(tables)
    return 0


def _export(table: TableConfig, args: argparse.Namespace, kind: str | None) -> list[str]:
    """Run the DynamoDB exports the ledger calls for; return their folders (s3://...)."""
    from ingestion import exports, ledger
    from ingestion.stream_writer import split_uri

    table_arn = args.table_arn or table.table_arn
    destination = args.to or table.export_to
    if not table_arn or not destination:
        raise TableConfigError(
            f"table {table.name}: exporting needs its table ARN and an s3:// destination "
            "(table_arn / export_to in dbt_project.yml, or --table-arn / --to)"
        )
    bucket, prefix = split_uri(destination)
    spark = spark_config.build_spark(f"export {table.name}")
    last_end = ledger.last_export_end(ledger.entries(spark, table.name))
    kind = kind or (manifest.INCREMENTAL if last_end else manifest.FULL)
    requests = exports.plan(table_arn, bucket, prefix, kind, last_end)
    if not requests:
        print(
            f"{table.name}: up to date (less than 15 minutes since {last_end}): nothing to export"
        )
        return []
    client = _dynamodb_client()
    folders = []
    for number, request in enumerate(requests, 1):
        window = (
            f" {request.window.start.isoformat()} -> {request.window.end.isoformat()}"
            if request.window
            else ""
        )
        print(f"[{number}/{len(requests)}] {request.export_type}{window}", flush=True)
        arn = exports.start(client, request)
        description = exports.wait(
            client, arn, args.poll, report=lambda line: print(line, flush=True)
        )
        folders.append(exports.export_folder(bucket, description))
    return folders


def _dynamodb_client() -> Any:
    import boto3

    return boto3.client("dynamodb")


def cmd_export(args: argparse.Namespace) -> int:
    table = get_table(args.table)
    kind = manifest.FULL if args.full else manifest.INCREMENTAL
    folders = _export(table, args, kind)
    for folder in folders:
        print(f"exported: {folder}")
    if folders and not args.no_ingest:
        code = _ingest(table, folders)
        if code != 0:
            return code
        _merge([table])
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    table = get_table(args.table)
    if args.stream:
        if args.sources or args.from_dynamodb:
            raise TableConfigError("give --stream, export folders or --from-dynamodb: one of them")
        _ingest_stream(table, args)
        _merge([table])
        return 0
    if args.from_dynamodb:
        if args.sources:
            raise TableConfigError("give export folders or --from-dynamodb, not both")
        args.sources = _export(table, args, None)
        if not args.sources:
            return 0
    elif not args.sources:
        raise TableConfigError("nothing to sync: give export folders, or --from-dynamodb")
    code = _ingest(table, args.sources, args.allow_gap)
    if code != 0:
        return code
    _merge([table])
    return 0


def cmd_maintain(args: argparse.Namespace) -> int:
    from datetime import timedelta

    from ingestion.maintenance import maintain

    tables = [get_table(t) for t in args.table] if args.table else list(load_tables().values())
    spark = spark_config.build_spark("maintain")
    for table in tables:
        report = maintain(spark, table, timedelta(hours=args.retention_hours), args.keep_snapshots)
        print("\n".join(report.lines()), flush=True)
    return 0


def cmd_register_glue(args: argparse.Namespace) -> int:
    from ingestion import glue

    tables = [get_table(t) for t in args.table] if args.table else list(load_tables().values())
    spark = spark_config.build_spark("register-glue")
    catalog = glue.glue_catalog(args.glue_endpoint)
    for table in tables:
        if not spark.catalog.tableExists(f"lake.lakehouse.{table.name}"):
            print(f"{table.name}: no final table yet, skipped")
            continue
        location = glue.current_metadata_location(spark, "lakehouse", table.name)
        done = glue.register(catalog, args.database, table.name, location)
        print(f"{done.table}: {'registered' if done.created else 'moved'} to {location}")
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    spark = spark_config.build_spark("query")
    df = spark.sql(args.sql)
    rows = df.limit(args.limit).collect() if args.format == "table" else df.toLocalIterator()
    write_rows(df.columns, (tuple(r) for r in rows), args.format)
    return 0


def spark_submit(argv: list[str]) -> None:
    """Run ``spark-submit ingestion/main.py ARGV`` with the profile's master and driver memory."""
    conf = spark_config.spark_conf()
    submit = Path(sys.executable).parent / "spark-submit"
    command = [
        str(submit if submit.exists() else "spark-submit"),
        "--master",
        conf.get("spark.master", "local[*]"),
        "--driver-memory",
        conf.get("spark.driver.memory", "2g"),
        str(settings.project_dir() / "ingestion" / "main.py"),
        *argv,
    ]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    print("$ " + " ".join(command[:1] + command[5:]), flush=True)
    if subprocess.run(command, env=env, check=False).returncode != 0:
        raise SubmitError(f"spark-submit {' '.join(argv)} failed (see its output above)")


def cmd_emr(args: argparse.Namespace) -> int:
    from ingestion import emr
    from ingestion.locations import s3_client
    from ingestion.stream_writer import split_uri

    built = emr.package(args.out if args.action == "package" else Path(".lakehouse-dist"))
    if args.action == "package":
        function = emr.package_lambda(args.out)
        print(f"job: {built.archive} ({built.digest}) and {built.entry_point}")
        print(f"Lambda function: {function} (handler ingestion.stream_writer.handler)")
        return 0
    arguments = [a for a in args.arguments if a != "--"]
    if not arguments:
        raise emr.EmrError("give the command to run after --, e.g. -- sync --table orders ...")
    bucket, prefix = split_uri(args.code)
    entry, archive = emr.upload(s3_client(), built, bucket, prefix)
    print(f"uploaded {archive}")
    name = "ddb-lakehouse " + " ".join(arguments[:3])
    import boto3

    if args.application_id:
        if not args.role_arn or not args.warehouse:
            raise emr.EmrError("EMR Serverless needs --role-arn and --warehouse")
        client = boto3.client("emr-serverless")
        run_id = emr.start_serverless(
            client,
            args.application_id,
            args.role_arn,
            entry,
            arguments,
            emr.spark_parameters(archive, args.warehouse, args.venv_archive),
            name,
        )
        what = f"job run {run_id} on application {args.application_id}"
        state = emr.serverless_state(client, args.application_id, run_id)
        done, failed = emr.DONE_SERVERLESS, emr.FAILED_SERVERLESS
    else:
        client = boto3.client("emr")
        step_id = emr.add_step(client, args.cluster_id, entry, arguments, archive, name)
        what = f"step {step_id} on cluster {args.cluster_id}"
        state = emr.step_state(client, args.cluster_id, step_id)
        done, failed = emr.DONE_STEP, emr.FAILED_STEP
    print(what)
    if not args.no_wait:
        emr.wait(state, done, failed, what, args.poll, lambda line: print(line, flush=True))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    started = time.monotonic()
    out = settings.lakehouse_home() / "samples"
    folders = sample.write_samples(out, args.items, args.seed)
    chain = sample.write_orders_chain(
        out, args.items or sample.SAMPLE_TABLES["orders"].default_items, args.seed
    )
    stream = sample_stream.write_books_stream(
        out, args.items or sample.SAMPLE_TABLES["books"].default_items, args.seed
    )
    exports = {"books": [folders["books"]], "orders": [folders["orders"], *chain]}
    # Computed now: ingesting the stream deletes its change files.
    expected = {
        t: len(sample.live_items(f, [k.name for k in get_table(t).keys]))
        for t, f in {**exports, "books": [folders["books"], stream / "books"]}.items()
    }
    print(f"sample exports written under {out}")
    for table, folder in folders.items():
        spark_submit(["ingest", "--table", table, str(folder)])
    _merge([get_table(t) for t in folders])
    print(f"\nthen {len(chain)} incremental exports of orders (the last one NEW_IMAGE), in order:")
    spark_submit(["ingest", "--table", "orders", *map(str, chain)])
    print("\nand the stream change files of books (as the Lambda function writes them):")
    spark_submit(["ingest", "--table", "books", "--stream", str(stream), "--settle", "0"])
    _merge([get_table("orders"), get_table("books")])
    spark = spark_config.build_spark("demo")
    rows = {t: spark.table(f"lake.lakehouse.{t}").count() for t in exports}
    print()
    print(
        format_table(
            [
                "final table",
                "rows",
                "items left by the exports and streams (from the files)",
                "match",
            ],
            [
                [f"lakehouse.{t}", rows[t], expected[t], "yes" if rows[t] == expected[t] else "NO"]
                for t in exports
            ],
        )
    )
    example = (
        "select id, title, author, price, pages from lakehouse.books "
        "order by price desc, id limit 5"
    )
    print(f"\nexample query: {example}")
    result = spark.sql(example)
    write_rows(result.columns, (tuple(r) for r in result.collect()), "table")
    print(
        f"\ndemo finished in {time.monotonic() - started:.1f}s; try: "
        'ddb-lakehouse status  or  ddb-lakehouse query "select count(*) from lakehouse.orders"'
    )
    return 0 if rows == expected else 1
