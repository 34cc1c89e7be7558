"""The sample generator's commands: ``sample`` (write sample exports) and ``demo`` (the whole
flow on them, each ingest a ``spark-submit`` job as a user would run it)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ingestion.cli import output
from ingestion.cli.merge import merge_tables
from ingestion.config import names, settings
from ingestion.dynamodb.tables import get_table
from ingestion.samples.exports import write_samples
from ingestion.samples.items import SAMPLE_TABLES
from ingestion.samples.live import live_items
from ingestion.samples.orders_chain import write_orders_chain
from ingestion.samples.stream import write_books_stream
from ingestion.spark import spark_config
from ingestion.spark.spark_submit import spark_submit

EXAMPLE_QUERY = (
    "select id, title, author, price, pages from lakehouse.books order by price desc, id limit 5"
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sample", help="write sample DynamoDB exports in AWS's exact layout")
    p.add_argument("--out", type=Path, help="folder (default: $LAKEHOUSE_HOME/samples)")
    _size_and_seed(p)
    p.add_argument("--table", action="append", choices=["books", "orders"], help="only these")
    p.add_argument(
        "--incrementals",
        type=int,
        default=3,
        help="incremental exports of orders after its full export (default 3)",
    )
    p.set_defaults(run=run_sample)

    p = sub.add_parser("demo", help="sample -> spark-submit ingest -> dbt run/test -> report")
    _size_and_seed(p)
    p.set_defaults(run=run_demo)


def _size_and_seed(p: argparse.ArgumentParser) -> None:
    p.add_argument("--items", type=int, help="items per table (default: books 500, orders 2000)")
    p.add_argument("--seed", type=int, default=7)


def _items(args: argparse.Namespace, table: str) -> int:
    return int(args.items or SAMPLE_TABLES[table].default_items)


def run_sample(args: argparse.Namespace) -> int:
    out = args.out or settings.lakehouse_home() / "samples"
    folders = write_samples(out, args.items, args.seed, args.table)
    for table, folder in folders.items():
        print(f"{table}: {folder}")
    if "books" in folders:
        location = write_books_stream(out, _items(args, "books"), args.seed)
        print(f"books (stream change files): {location / 'books'}  (ingest --stream {location})")
    if "orders" in folders and args.incrementals:
        for folder in write_orders_chain(out, _items(args, "orders"), args.seed, args.incrementals):
            print(f"orders (incremental): {folder}")
    return 0


def run_demo(args: argparse.Namespace) -> int:
    started = time.monotonic()
    out = settings.lakehouse_home() / "samples"
    folders = write_samples(out, args.items, args.seed)
    chain = write_orders_chain(out, _items(args, "orders"), args.seed)
    stream = write_books_stream(out, _items(args, "books"), args.seed)
    sources = {"books": [folders["books"], stream / "books"], "orders": [folders["orders"], *chain]}
    # Computed now: ingesting the stream deletes its change files.
    expected = {
        t: len(live_items(f, [k.name for k in get_table(t).keys])) for t, f in sources.items()
    }
    print(f"sample exports written under {out}")
    for table, folder in folders.items():
        spark_submit(["ingest", "--table", table, str(folder)])
    merge_tables([get_table(t) for t in folders])
    print(f"\nthen {len(chain)} incremental exports of orders (the last one NEW_IMAGE), in order:")
    spark_submit(["ingest", "--table", "orders", *map(str, chain)])
    print("\nand the stream change files of books (as the Lambda function writes them):")
    spark_submit(["ingest", "--table", "books", "--stream", str(stream), "--settle", "0"])
    merge_tables([get_table("orders"), get_table("books")])
    spark = spark_config.build_spark("demo")
    rows = {t: spark.table(names.final_table(t)).count() for t in sources}
    print()
    print(
        output.format_table(
            [
                "final table",
                "rows",
                "items left by the exports and streams (from the files)",
                "match",
            ],
            [
                [f"lakehouse.{t}", rows[t], expected[t], "yes" if rows[t] == expected[t] else "NO"]
                for t in sources
            ],
        )
    )
    print(f"\nexample query: {EXAMPLE_QUERY}")
    result = spark.sql(EXAMPLE_QUERY)
    output.write_rows(result.columns, (tuple(r) for r in result.collect()), "table")
    print(
        f"\ndemo finished in {time.monotonic() - started:.1f}s; try: "
        'ddb-lakehouse status  or  ddb-lakehouse query "select count(*) from lakehouse.orders"'
    )
    return 0 if rows == expected else 1
