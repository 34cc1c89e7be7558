"""The keys a merge's batches touched, read from the change log once per merge and shared: the
merge's counts (``merge_counts.commit_counts``) and the rows its scoped tests read
(``runner.tested_views``) each looked them up themselves, three scans of the change log's key
columns a merge where one does (bench/apply_cost.py, docs/performance.md)."""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingestion.config import names
from ingestion.dynamodb.tables import TableConfig


class TouchedKeys:
    """Each table's touched keys per set of batches, read at the first ask and cached in this
    session until ``release``: the key columns of the table's staged changes of those batches,
    each key once."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._found: dict[tuple[str, tuple[str, ...]], DataFrame] = {}

    def of(self, table: TableConfig, batches: Iterable[str]) -> DataFrame:
        wanted = (table.name, tuple(sorted(set(batches))))
        found = self._found.get(wanted)
        if found is None:
            keys = [k.column for k in table.keys]
            found = (
                self._spark.table(names.staging_table(table.name))
                .where(F.col("_batch_id").isin(list(wanted[1])))
                .select(*keys)
                .distinct()
                .cache()
            )
            # Read now, once: the reads that use it next may run at once, on threads, and each
            # would read it again while the cache is not filled yet.
            found.count()
            self._found[wanted] = found
        return found

    def release(self) -> None:
        """Every cached set of keys dropped from the session's cache."""
        for found in self._found.values():
            found.unpersist()
        self._found.clear()
