"""``sample`` and ``demo``. The demo: sample exports, incremental exports and stream change files
written in AWS's exact layout, each ingest a ``spark-submit`` job as a user would run it, merged,
and the final tables' rows compared with what the files leave (computed in plain Python,
``expected_state``), and ``books`` verified against its full export (``verify``: the keys its stream
changed since compared as the change log held them at the export's instant)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingestion.config import names, settings
from ingestion.dynamodb.tables import get_table
from ingestion.jobs.apply import merge_tables
from ingestion.jobs.reporter import Reporter
from ingestion.maintenance.verify import VerifyReport, verify
from ingestion.samples.expected_state import expected_items
from ingestion.samples.items import SAMPLE_TABLES
from ingestion.samples.orders_chain import write_orders_chain
from ingestion.samples.sample_exports import write_samples
from ingestion.samples.single_table import TABLE, write_single_table
from ingestion.samples.stream import write_books_stream
from ingestion.spark import spark_config
from ingestion.spark.spark_submit import spark_submit

EXAMPLE_QUERY = (
    f"select id, title, author, price, pages from {names.FINAL}.books order by price desc, id "
    "limit 5"
)


@dataclass(frozen=True)
class DemoResult:
    rows: dict[str, int]  # final table -> rows
    expected: dict[str, int]  # final table -> items the files leave
    query_columns: list[str]
    query_rows: list[tuple[Any, ...]]  # EXAMPLE_QUERY's result
    verified: VerifyReport  # books against its full export
    seconds: float

    @property
    def matches(self) -> bool:
        return self.rows == self.expected and self.verified.equal


def items_of(table: str, items: int | None) -> int:
    return int(items or SAMPLE_TABLES[table].default_items)


SINGLE_TABLE_USERS = (
    200  # the single-table sample's users (4 items each, a session for every fifth)
)


def write_sample_files(
    out: Path,
    items: int | None,
    seed: int,
    tables: list[str] | None,
    incrementals: int,
    report: Callable[[str], Any],
) -> None:
    """``sample``: full exports of ``tables`` (default both), the stream change files of
    ``books`` and ``incrementals`` incremental exports of ``orders``, each reported."""
    exported = [t for t in tables or SAMPLE_TABLES if t != TABLE]
    folders = write_samples(out, items, seed, exported) if exported else {}
    for table, folder in folders.items():
        report(f"{table}: {folder}")
    if tables and TABLE in tables:
        folder = write_single_table(out, (items or SINGLE_TABLE_USERS), seed)
        report(f"{TABLE} (single-table design): {folder}")
        report(
            f"  register it: ddb-lakehouse add-table {TABLE} --partition-key pk:S --sort-key sk:S "
            f"--entity-key sk --entity USER --entity ORDER --entity ADDRESS"
        )
    if "books" in folders:
        location = write_books_stream(out, items_of("books", items), seed)
        report(f"books (stream change files): {location / 'books'}  (ingest --stream {location})")
    if "orders" in folders and incrementals:
        for folder in write_orders_chain(out, items_of("orders", items), seed, incrementals):
            report(f"orders (incremental): {folder}")


def run_demo(items: int | None, seed: int, reporter: Reporter) -> DemoResult:
    started = time.monotonic()
    out = settings.lakehouse_home() / "samples"
    folders = write_samples(out, items, seed)
    chain = write_orders_chain(out, items_of("orders", items), seed)
    stream = write_books_stream(out, items_of("books", items), seed)
    sources = {"books": [folders["books"], stream / "books"], "orders": [folders["orders"], *chain]}
    # Computed now: ingesting the stream deletes its change files.
    expected = {
        t: len(expected_items(f, [k.name for k in get_table(t).keys])) for t, f in sources.items()
    }
    reporter.line(f"sample exports written under {out}")
    for table, folder in folders.items():
        spark_submit(["ingest", "--table", table, str(folder)])
    merge_tables([get_table(t) for t in folders], reporter)
    reporter.line(
        f"\nthen {len(chain)} incremental exports of orders (the last one NEW_IMAGE), in order:"
    )
    spark_submit(["ingest", "--table", "orders", *map(str, chain)])
    reporter.line("\nand the stream change files of books (as the Lambda function writes them):")
    spark_submit(["ingest", "--table", "books", "--stream", str(stream), "--settle", "0"])
    merge_tables([get_table("orders"), get_table("books")], reporter)
    spark = spark_config.build_spark("demo")
    rows = {t: spark.table(names.final_table(t)).count() for t in sources}
    result = spark.sql(EXAMPLE_QUERY)
    verified = verify(spark, get_table("books"), str(folders["books"]))
    return DemoResult(
        rows,
        expected,
        result.columns,
        [tuple(r) for r in result.collect()],
        verified,
        time.monotonic() - started,
    )
