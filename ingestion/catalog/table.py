"""A table's handle: one configured table as the catalog holds it, loaded once per job.

It holds the table's names and reads its state on first use, once: the change log's metadata
(its snapshots, the kept types in its properties, the ledger in its summaries), the final
table's metadata, and the batches the merge log holds. ``refresh`` forgets what was read, for a
step that needs the table as another commit left it (the merge's own commit, before its counts).

Decision: a handle reads lazily and keeps what it read, rather than a loader reading everything
up front: a merge with nothing new reads the change log's metadata and the merge log only, and
a job that never merges never reads the final table. Reads are counted (``table_metadata.READS``)
so a test can hold a merge to one read of each (tests/merge/test_table_handle.py).
"""

from __future__ import annotations

from functools import cached_property

from pyspark.sql import SparkSession

from ingestion.catalog import merge_log, table_metadata, table_types
from ingestion.catalog.ledger import Entry, entries_from
from ingestion.catalog.table_metadata import Metadata, Reader
from ingestion.config import names
from ingestion.dynamodb.entities import final_tables
from ingestion.dynamodb.tables import TableConfig
from ingestion.schema import types

# What ``refresh`` forgets: every read of the handle.
_READS = (
    "change_log",
    "final",
    "snapshot",
    "history_final",
    "ledger",
    "kept_types",
    "merged",
    "new_batches",
)


class Table:
    """One final table of a table entry (a single-table design's entity table, or the entry
    itself), with the entry's change log. ``config`` is the final table's configuration,
    ``entry`` its table entry's (the same object for a table without an entity rule)."""

    def __init__(
        self,
        config: TableConfig,
        reader: Reader,
        spark: SparkSession | None = None,
        entry: TableConfig | None = None,
    ) -> None:
        self.config = config
        self.entry = entry or config
        self.name = config.name
        self.keys = config.keys
        self.key_columns = [k.column for k in self.keys]
        self.history = config.history
        self.staging_name = names.staging_table(self.entry.name)  # quoted, as SQL names it
        self.final_name = names.final_table(self.name)
        # The names its batches are recorded under in the merge log (``merge_log.logged_names``).
        self.logged_as = [self.name, f"{self.name}__history"] if self.history else [self.name]
        self._reader = reader
        self.spark = spark

    def __repr__(self) -> str:
        return f"Table({self.name!r})"

    def use(self, spark: SparkSession) -> None:
        """Read through ``spark`` from now on; what was read stays (it was the committed state
        when read, and Spark's catalog loads a table it has not seen as committed now)."""
        self.spark = spark
        self._reader = table_metadata.SparkReader(spark)
        for final in self.__dict__.get("finals", ()):
            if final is not self:
                final.use(spark)

    def refresh(self, *reads: str) -> None:
        """Forget ``reads`` (all, when none is named; ``final`` with the snapshot it gives):
        the next use reads them again."""
        for read in reads or _READS:
            self.__dict__.pop(read, None)
            if read == "final":
                self.__dict__.pop("snapshot", None)
        for final in self.__dict__.get("finals", ()):
            if final is not self:
                final.refresh(*reads)

    @cached_property
    def change_log(self) -> Metadata | None:
        """The change log's metadata, as committed when first read (fresh from the catalog:
        another process, an ingest or a rebuild, may have committed since Spark cached it)."""
        return self._reader.read(names.STAGING, self.entry.name, fresh=True)

    @cached_property
    def final(self) -> Metadata | None:
        """The final table's metadata, as this job's catalog holds it."""
        return self._reader.read(names.FINAL, self.name)

    @cached_property
    def history_final(self) -> Metadata | None:
        """The metadata of the final table's history (``history: true``), or None."""
        return self._reader.read(names.FINAL, f"{self.name}__history") if self.history else None

    @cached_property
    def snapshot(self) -> int | None:
        """The final table's newest snapshot, or None (no final table, or no commit yet)."""
        newest = self.final.newest if self.final is not None else None
        return newest.snapshot_id if newest is not None else None

    @cached_property
    def ledger(self) -> list[Entry]:
        """The ledger of the change log, in commit order."""
        table_metadata.READS[("ledger", self.entry.name)] += 1
        log = self.change_log
        return entries_from([(s.committed_at, s.summary) for s in log.snapshots] if log else [])

    @cached_property
    def kept_types(self) -> types.Schema | None:
        """The types kept with the change log (its entry's, entities' sections included)."""
        log = self.change_log
        text = log.properties.get(table_types.PROPERTY) if log is not None else None
        return table_types.parse(text, self.entry) if text else None

    @cached_property
    def merged(self) -> set[str]:
        """The batches the merge log holds for the final table and (``history``) its history."""
        if self.spark is None:
            return merge_log.merged_without_spark(self.logged_as)
        return set.intersection(*(merge_log.merged_batches(self.spark, n) for n in self.logged_as))

    @cached_property
    def new_batches(self) -> list[str]:
        """The ledger's batches, in commit order, the merge log lacks."""
        return merge_log.unmerged(self.ledger, self.merged)

    @cached_property
    def finals(self) -> list[Table]:
        """The handles of the final tables this entry's change log feeds (itself, without an
        entity rule), each reading the change log's metadata read here, if it was."""
        found = []
        for config in final_tables(self.config):
            handle = (
                self
                if config is self.config
                else Table(config, self._reader, self.spark, self.entry)
            )
            for shared in ("change_log", "ledger", "kept_types"):
                if shared in self.__dict__ and handle is not self:
                    handle.__dict__[shared] = self.__dict__[shared]
            found.append(handle)
        return found


def load(configs: list[TableConfig], spark: SparkSession | None = None) -> list[Table]:
    """Handles for the table entries ``configs``, reading through ``spark`` or, without it, from
    the metadata files (``table_metadata.available``). Nothing is read yet."""
    reader = table_metadata.reader(spark)
    return [Table(config, reader, spark) for config in configs]
