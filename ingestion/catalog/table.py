"""A table's handle: one configured table as the catalog holds it, loaded once per job.

Loading reads the table's state, once: the change log's metadata (its snapshots, the ledger in
their summaries), the final table's metadata (and its history's), and the batches the merge log
holds; the kept types in the change log's properties are parsed on first use. Every step of the
job reads them from the handle. ``refresh`` reads a part again where the job needs the table as a
later commit left it (staging after an adoption rebuilt it); ``committed`` takes the merge's own
commit from the session that wrote it.

Decision: loaded whole, up front, rather than read where each step first asks: the steps that
use a table are many and spread over the flow, and a handle read whole is one read of each part
whichever step comes first. The kept types are the exception: they are parsed only where a step
needs them (a merge with nothing new never does). Reads are counted (``table_metadata.READS``)
so a test holds a merge to one read of each (tests/merge/test_table_handle.py).
"""

from __future__ import annotations

from collections.abc import Collection
from functools import cached_property

from pyspark.sql import SparkSession

from ingestion.catalog import merge_log, table_metadata, table_types
from ingestion.catalog.ledger import Entry, entries_from
from ingestion.catalog.table_metadata import Metadata, Reader
from ingestion.config import names
from ingestion.dynamodb.entities import final_tables
from ingestion.dynamodb.tables import TableConfig
from ingestion.schema import types

# The parts of a table's state ``refresh`` reads again: the change log (with its ledger and
# kept types), the final table (with its snapshot), its history, the merge log's batches.
PARTS = ("change_log", "final", "history", "merged")


class Table:
    """One final table of a table entry (a single-table design's entity table, or the entry
    itself), with the entry's change log. ``config`` is the final table's configuration,
    ``entry`` its table entry's (the same object for a table without an entity rule).
    ``finals``: the handles of the final tables the entry's change log feeds (itself, without
    an entity rule), sharing its change log's reads."""

    change_log: Metadata | None  # the change log's metadata, as committed when read
    ledger: list[Entry]  # the change log's ledger, in commit order
    final: Metadata | None  # the final table's metadata
    snapshot: int | None  # the final table's current snapshot (None: no table, or no commit)
    history_final: Metadata | None  # the history's metadata (``history: true``), or None
    merged: set[str]  # the batches the merge log holds for the final table and its history
    new_batches: list[str]  # the ledger's batches, in commit order, the merge log lacks

    def __init__(
        self,
        config: TableConfig,
        reader: Reader,
        spark: SparkSession | None = None,
        entry: Table | None = None,
    ) -> None:
        self.config = config
        self.entry = entry.config if entry is not None else config
        self.name = config.name
        self.history = config.history
        # The names its batches are recorded under in the merge log (``merge_log.logged_names``).
        self.logged_as = [self.name, f"{self.name}__history"] if self.history else [self.name]
        self._reader = reader
        self.spark = spark
        self._owner = entry  # an entity's table: the entry's handle, whose change log it shares
        # A single-table design's entry has no final table of its own: one per entity (``finals``).
        self._own_final = config.entities is None or bool(config.staging)
        self.finals = [self]
        self.final = self.history_final = None
        self.snapshot = None
        self.merged, self.new_batches = set(), []
        if entry is not None:
            self.change_log, self.ledger = entry.change_log, entry.ledger
        self._read(PARTS)
        if not self._own_final:
            self.finals = [Table(f, reader, spark, self) for f in final_tables(config)]
        self.staging_name = names.staging_table(self.entry.name)  # quoted, as SQL names it
        self.final_name = names.final_table(self.name)
        self.model = names.staging_model(self.name)  # what dbt selects (``dbt_process.selector``)
        self.keys = config.keys
        self.key_columns = [k.column for k in self.keys]

    def __repr__(self) -> str:
        return f"Table({self.name!r})"

    def use(self, spark: SparkSession) -> None:
        """Read through ``spark`` from now on. Where a job switches to Spark it decides from the
        change log as committed then: a rebuild may have committed meanwhile, and a merge that
        missed its wider types would write them into narrower columns. Read from the files,
        the change log is checked against the catalog's pointer (no metadata read) and read
        again only when another commit moved it; Spark's cached copy is dropped either way, so
        its queries load the table as committed. What else was read stays."""
        before = self._reader
        self.spark = spark
        self._reader = table_metadata.SparkReader(spark)
        for final in self.finals:
            if final is not self:
                final.spark, final._reader = spark, self._reader
        if self._owner is not None:
            return  # its entry's handle reads the change log they share
        if before.unchanged(names.STAGING, self.entry.name, self.change_log):
            table_metadata.forget(spark, self.staging_name)
        else:
            self.refresh("change_log")

    def refresh(self, *parts: str) -> None:
        """Read ``parts`` of ``PARTS`` again (all, when none is named). An entry's entity tables
        read theirs too, sharing its change log."""
        wanted = parts or PARTS
        unknown = sorted(set(wanted) - set(PARTS))
        if unknown:
            raise ValueError(f"{', '.join(unknown)}: no part of a table's state ({PARTS})")
        self._read(wanted, merged_again="merged" in wanted)
        if not self._own_final:
            for final in self.finals:
                final.change_log, final.ledger = self.change_log, self.ledger
                final.refresh(*wanted)

    def committed(self, replaced: bool = False) -> None:
        """The final table as the merge's own commit left it (its metadata and current snapshot),
        for the counts. After an incremental merge, from the Spark session that committed it
        (``table_metadata.committed``: nothing fetched). ``replaced``: the merge built the table
        anew (a first build, a full refresh), which Iceberg's catalog cache does not keep: the
        new table is read."""
        if replaced:
            self._read(("final",))
        else:
            assert self.spark is not None, "a merge commits through Spark"
            self.final = table_metadata.committed(self.spark, self.final_name)
            self.snapshot = _current(self.final)

    def _read(self, parts: Collection[str], merged_again: bool = True) -> None:
        """Read ``parts`` of the table's state, in one place (one trip out to the readers).
        ``merged_again``: the merge log read again, else only the batches it lacks worked out
        again (after the change log was)."""
        if "change_log" in parts and self._owner is None:
            # Fresh from the catalog: another process (an ingest, a rebuild) may have committed
            # since Spark cached the table.
            self.change_log = self._reader.read(names.STAGING, self.entry.name, fresh=True)
            table_metadata.READS[("ledger", self.entry.name)] += 1
            commits = self.change_log.snapshots if self.change_log is not None else []
            self.ledger = entries_from([(s.committed_at, s.summary) for s in commits])
            self.__dict__.pop("kept_types", None)
        if not self._own_final:
            return
        if "final" in parts:
            self.final = self._reader.read(names.FINAL, self.name)
            self.snapshot = _current(self.final)
        if "history" in parts and self.history:
            self.history_final = self._reader.read(names.FINAL, f"{self.name}__history")
        if "merged" in parts or "change_log" in parts:
            if merged_again:
                spark = self.spark
                if spark is None:
                    self.merged = merge_log.merged_without_spark(self.logged_as)
                else:
                    self.merged = merge_log.merged_under(spark, self.logged_as)
            self.new_batches = merge_log.unmerged(self.ledger, self.merged)

    @cached_property
    def kept_types(self) -> types.Schema | None:
        """The types kept with the change log (its entry's, entities' sections included): parsed
        once per entry, its entity tables asking their entry's handle."""
        if self._owner is not None:
            return self._owner.kept_types
        log = self.change_log
        text = log.properties.get(table_types.PROPERTY) if log is not None else None
        return table_types.parse(text, self.entry, self.staging_name) if text else None


def load(configs: list[TableConfig], spark: SparkSession | None = None) -> list[Table]:
    """Handles for the table entries ``configs``, reading through ``spark`` or, without it, from
    the metadata files (``table_metadata.files``)."""
    reader = table_metadata.reader(spark)
    return [Table(config, reader, spark) for config in configs]


def _current(final: Metadata | None) -> int | None:
    """The final table's current snapshot, the state the merge builds on (after a rollback, not
    the last one committed); None: no table, or no commit yet."""
    current = final.current if final is not None else None
    return current.snapshot_id if current is not None else None
