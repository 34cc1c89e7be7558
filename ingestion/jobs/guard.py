"""The one place a job takes a table for itself: the machine's lock (``table_lock``) and the
catalog's lease (``lease``), always together and always in that order, released in reverse.

``watch`` holds a table for its whole life, ``rebuild`` while it replaces staging; a second
process of either kind on the same machine, or anywhere that shares the catalog, stops with
``TableBusy`` naming the holder.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

from ingestion.config import settings
from ingestion.jobs import lease, table_lock
from ingestion.spark import spark_config


@contextmanager
def held_table(table: str, purpose: str) -> Iterator[tuple[SparkSession, lease.Lease]]:
    """The Spark session of ``purpose`` on ``table`` and the lease it holds; the lock is taken
    before Spark starts (a busy table fails fast) and both are released on the way out."""
    lock = table_lock.hold(settings.lakehouse_home(), table, purpose)
    try:
        spark = spark_config.build_spark(f"{purpose} {table}")
        held = lease.hold(spark, table, purpose)
        try:
            yield spark, held
        finally:
            held.release()
    finally:
        lock.close()
