"""The keys a merge's batches touched, read from the change log at the first ask and kept for
the merge: the counts look them up where the merge's commit alone cannot tell them
(``merge_counts.commit_counts``); a merge whose commit tells them reads none."""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingestion.catalog.table import Table

# A change without a `_version`, in ``_oldest``: below every version (the least bigint).
_NO_VERSION = -(2**63)


class TouchedKeys:
    """Each table's touched keys per set of batches, read at the first ask and cached in this
    session until ``release``: the key columns of the table's staged changes of those batches,
    each key once, with the oldest `_version` of its changes there."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._found: dict[tuple[str, tuple[str, ...]], tuple[DataFrame, int | None]] = {}

    def of(self, table: Table, batches: Iterable[str]) -> DataFrame:
        """The touched keys: the key columns, each key once."""
        return self._read(table, batches)[0].select(*table.key_columns)

    def oldest_version(self, table: Table, batches: Iterable[str]) -> int | None:
        """The lowest `_version` of the batches' changes. A touched key's latest change is at
        least as new (the change order compares `_version` first, macros/change_order.sql), so
        a read of its changes may skip older ones: Iceberg then skips every data file whose
        `_version` bounds are all older. None when the batches hold no change, or a change
        without a version (ingest never stages one; the change order puts it first, so no
        bound holds): nothing may be skipped."""
        return self._read(table, batches)[1]

    def _read(self, table: Table, batches: Iterable[str]) -> tuple[DataFrame, int | None]:
        wanted = (table.name, tuple(sorted(set(batches))))
        found = self._found.get(wanted)
        if found is None:
            keys = table.key_columns
            frame = (
                self._spark.table(table.staging_name)
                .where(F.col("_batch_id").isin(list(wanted[1])))
                .groupBy(*keys)
                .agg(F.min(F.coalesce("_version", F.lit(_NO_VERSION))).alias("_oldest"))
                .cache()
            )
            self._found[wanted] = (frame, None)  # released by ``release`` if the read fails
            # Read now, once (every partition, so the cache is filled): the reads that use it
            # next may run at once, on threads, and each would read it again while the cache
            # is not filled yet.
            oldest = frame.agg(F.min("_oldest")).first()
            bound = None if oldest is None or oldest[0] in (None, _NO_VERSION) else int(oldest[0])
            found = self._found[wanted] = (frame, bound)
        return found

    def release(self) -> None:
        """Every cached set of keys dropped from the session's cache."""
        for frame, _ in self._found.values():
            frame.unpersist()
        self._found.clear()
