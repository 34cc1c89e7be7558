"""What a merge changed in a final table: inserted, updated and deleted rows."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingestion.catalog import table_metadata
from ingestion.catalog.table import Table
from ingestion.catalog.table_metadata import Metadata
from ingestion.config import names
from ingestion.dynamodb.entities import final_tables
from ingestion.dynamodb.tables import TableConfig
from ingestion.merge.touched_keys import TouchedKeys
from ingestion.schema.types import INSERTED_BATCH
from ingestion.sources import manifest


@dataclass(frozen=True)
class MergeCounts:
    table: str
    rows: int
    inserted: int
    updated: int
    deleted: int
    batches: tuple[str, ...] = ()  # the batches this merge applied


def per_entry(tables: list[TableConfig], counts: list[MergeCounts]) -> list[MergeCounts]:
    """The counts of a merge of ``tables`` (a count per final table) summed per table entry:
    a single-table design's entity tables as one (its merge applied the same batches to each)."""
    by_final = {c.table: c for c in counts}
    summed = []
    for table in tables:
        parts = [by_final[f.name] for f in final_tables(table) if f.name in by_final]
        rows, inserted, updated, deleted = (
            sum(getattr(p, n) for p in parts) for n in ("rows", "inserted", "updated", "deleted")
        )
        batches = parts[0].batches if parts else ()
        summed.append(MergeCounts(table.name, rows, inserted, updated, deleted, batches))
    return summed


def merged(
    spark: SparkSession,
    table: Table,
    refreshed_from: DataFrame | None,
    before: int | None,
    batches: list[str],
    touched: TouchedKeys,
) -> MergeCounts:
    """What a merge of ``batches`` changed in one final table (its handle read after the merge's
    commit): from its refresh (``refreshed_from``: the keys and versions before it), or from
    its commits."""
    if refreshed_from is not None:
        found = refresh_counts(spark, table, refreshed_from, table.snapshot)
    else:
        kinds = {e.batch_id: e.kind for e in table.ledger}
        rebaselined = any(kinds.get(b) == manifest.FULL for b in batches)
        found = commit_counts(
            spark, table, before, table.snapshot, batches, touched, rebaselined, final=table.final
        )
    return replace(found, batches=tuple(batches))


def current_snapshot(spark: SparkSession, table: str) -> int | None:
    """The final table's current snapshot (after a rollback, not the last one committed), or
    None (no final table, or no commit yet)."""
    metadata = table_metadata.read(spark, names.final_table(table))
    current = metadata.current if metadata is not None else None
    return current.snapshot_id if current is not None else None


def commit_counts(
    spark: SparkSession,
    table: Table,
    before: int | None,
    after: int | None,
    batches: list[str] | tuple[str, ...],
    touched: TouchedKeys,
    rebaselined: bool = False,
    final: Metadata | None = None,
) -> MergeCounts:
    """Inserted / updated / deleted rows of a merge, from what it applied, not a table diff.

    From the merge's commit alone when it can tell (``from_commit``: the rows it wrote and its
    summary). Else the keys the merged batches touched (``touched``, read there and then)
    are looked up in the final table before and after the merge (their key and version columns only;
    the few touched keys are broadcast, so nothing of the table is shuffled): new there = inserted,
    gone = deleted, a newer version = updated. A full export's re-baseline also deletes keys no
    batch touched: its deleted rows are the rows before, plus those inserted, less the rows after.
    A first build or a full refresh inserted every row. ``final``: the final table's metadata at
    ``after``, when read already (the table's handle)."""
    name = table.final_name
    if after is None:
        return MergeCounts(table.name, 0, 0, 0, 0)
    final = final or table_metadata.read(spark, name)
    if before is None or not _has_snapshot(final, int(before)):
        # first build, or a full refresh re-created the table
        rows = _counted(spark, table.name, int(after))
        return MergeCounts(table.name, rows, rows, 0, 0)
    if before == after or not batches:
        return MergeCounts(table.name, _counted(spark, table.name, int(after)), 0, 0, 0)
    committed = None if rebaselined else from_commit(spark, table, before, after, batches, final)
    if committed is not None:
        inserted, updated, deleted = committed
        rows = _rows_after(spark, final, table.name, int(before), int(after), inserted - deleted)
        return MergeCounts(table.name, rows, inserted, updated, deleted)
    keys = table.key_columns
    touched_keys = F.broadcast(touched.of(table, batches))  # each key once, however often changed

    def state(snapshot: int, side: str) -> DataFrame:
        rows = spark.sql(f"select * from {name} version as of {int(snapshot)}")
        return versions(rows.join(touched_keys, on=keys, how="left_semi"), table, side)

    old, new = state(int(before), "old"), state(int(after), "new")
    inserted, deleted, updated = _diff(old, new, keys)
    if rebaselined:
        # The re-baseline also deleted keys no batch touched: counted from the rows before and
        # after (a final table holds each key once), never from the commits' delete files (a
        # merge into a data file that already has a delete file rewrites its old positions into
        # the new one, so `added-position-deletes` counts earlier deletes again).
        rows_before = _rows_at(spark, table.name, int(before))
        rows = _counted(spark, table.name, int(after))
        return MergeCounts(table.name, rows, inserted, updated, rows_before + inserted - rows)
    # Exact: the counts are of keys, and a final table holds each key once.
    rows = _rows_after(spark, final, table.name, int(before), int(after), inserted - deleted)
    return MergeCounts(table.name, rows, inserted, updated, deleted)


def from_commit(
    spark: SparkSession,
    table: Table,
    before: int,
    after: int,
    batches: list[str] | tuple[str, ...],
    metadata: Metadata | None = None,
) -> tuple[int, int, int] | None:
    """Inserted, updated and deleted rows of the merge's commit ``after`` (child of ``before``),
    from the rows it wrote and its snapshot summaries, with no read of the table as it was
    before. A merge-on-read MERGE writes a new row for each insert and update (its
    `added-records`), and a position delete for each update and delete (the live position
    deletes grow by as many: a data file's earlier deletes that its new delete file carries
    over leave with the file they were in). Those are two numbers of three; the rows it wrote
    give the third: an insert wrote its own batch into `_inserted_batch_id`, an update kept the
    row's (``INSERTED_BATCH``). The rows it wrote are the live rows of the merged ``batches``
    (found by their `_batch_id`, whose bounds let Iceberg skip every older data file).

    The rows of the table's last full build hold null there (an update of one keeps it). None, and
    the caller looks the touched keys up in both snapshots, whenever the argument does not hold: the
    commit is not this session's one child of ``before``, the table has no such column, the commit
    removed data files or has equality deletes (a table switched to copy-on-write rewrites files:
    its added records are not its writes), or more live rows carry the batches than the commit wrote
    (an earlier attempt of the same batches committed them: a merge whose tests failed, applied
    again)."""
    name = table.final_name
    metadata = metadata or table_metadata.read(spark, name)
    if metadata is None or INSERTED_BATCH not in metadata.columns:
        return None
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    old, new = by_id.get(int(before)), by_id.get(int(after))
    if old is None or new is None or new.parent_id != int(before):
        return None
    if new.summary.get("spark.app.id") != spark.sparkContext.applicationId:
        return None
    try:
        written = int(new.summary.get("added-records", "0"))
        position_deletes = int(new.summary["total-position-deletes"]) - int(
            old.summary["total-position-deletes"]
        )
        equality_deletes = int(new.summary.get("total-equality-deletes", "0"))
        removed_files = int(new.summary.get("deleted-data-files", "0"))
    except (KeyError, ValueError):
        return None
    if equality_deletes or removed_files:
        return None
    rows = spark.sql(f"select * from {name} version as of {int(after)}")
    mine = rows.where(F.col("_batch_id").isin(list(batches)))
    found = mine.agg(
        F.count(F.lit(1)).alias("rows"),
        F.count_if(F.col(INSERTED_BATCH) == F.col("_batch_id")).alias("inserted"),
    ).first()
    if found is None or int(found["rows"]) != written:
        return None
    inserted = int(found["inserted"])
    updated = written - inserted
    deleted = position_deletes - updated
    return (inserted, updated, deleted) if deleted >= 0 else None


def _rows_at(spark: SparkSession, table: str, snapshot: int) -> int:
    """The rows at ``snapshot``: remembered when this process counted or derived them there."""
    known = _rows.get(table)
    if known is not None and known[0] == snapshot:
        return known[1]
    name = names.final_table(table)
    total = spark.sql(f"select count(*) from {name} version as of {snapshot}").first()
    return int(total[0]) if total else 0


# The rows of a final table at a snapshot this process counted or derived: the next merge's
# ``before`` (a watch's next tick) then needs no count of the whole table (a scan that applies
# every delete file: about 0.2 s of a tick at 500 rows, and growing with the table).
_rows: dict[str, tuple[int, int]] = {}


def _counted(spark: SparkSession, table: str, snapshot: int) -> int:
    name = names.final_table(table)
    total = spark.sql(f"select count(*) from {name} version as of {snapshot}").first()
    _rows[table] = (snapshot, int(total[0]) if total else 0)
    return _rows[table][1]


def _rows_after(
    spark: SparkSession, metadata: Metadata | None, table: str, before: int, after: int, grew: int
) -> int:
    """The rows at ``after``, the merge's commit that added ``grew`` rows net to ``before``:
    derived from the rows at ``before`` when this process knows them and that commit is the
    only one since that changed rows (from ``after`` back to the snapshot it last counted or
    derived, one commit that is not a compaction, ``replace``: the same rows, ``before``'s
    child, committed by this session); else counted. Another writer's commit in between (a
    ``merge`` of another process, a hand-made ``DELETE``) means a count."""
    known = _rows.get(table)
    by_id = {s.snapshot_id: s for s in (metadata.snapshots if metadata else [])}
    current, changed = by_id.get(after), []
    while known is not None and current is not None and current.snapshot_id != known[0]:
        if current.operation != "replace":
            changed.append(current)
        current = by_id.get(current.parent_id) if current.parent_id is not None else None
    derived = (
        known is not None
        and current is not None
        and len(changed) == 1
        and changed[0].parent_id == before
        # and that commit is this process's (its dbt run shares this session)
        and changed[0].summary.get("spark.app.id") == spark.sparkContext.applicationId
    )
    if not derived:
        return _counted(spark, table, after)
    assert known is not None
    _rows[table] = (after, known[1] + grew)
    return known[1] + grew


def _has_snapshot(metadata: Metadata | None, snapshot: int) -> bool:
    return metadata is not None and any(s.snapshot_id == snapshot for s in metadata.snapshots)


def versions(rows: DataFrame, table: Table, side: str) -> DataFrame:
    """Each key of ``rows`` with the version of its row (``side``: old or new)."""
    return rows.select(
        *table.key_columns, F.struct("_version", F.coalesce("_sequence", F.lit(""))).alias(side)
    )


def before_refresh(spark: SparkSession, table: Table) -> DataFrame | None:
    """The final table's keys and versions before a full refresh re-creates it (kept in this
    process: the refresh drops the table's history), or None when there is no final table."""
    if table.final is None:
        return None
    return versions(spark.table(table.final_name), table, "old").localCheckpoint()


def refresh_counts(
    spark: SparkSession, table: Table, old: DataFrame, after: int | None
) -> MergeCounts:
    """What a full refresh changed: the keys and versions before it against after it (a drift
    adopted rewrites every row, but changes only the rows the new batches touched)."""
    if after is None:
        return MergeCounts(table.name, 0, 0, 0, 0)
    rows = spark.sql(f"select * from {table.final_name} version as of {int(after)}")
    inserted, deleted, updated = _diff(old, versions(rows, table, "new"), table.key_columns)
    return MergeCounts(table.name, rows.count(), inserted, updated, deleted)


def _diff(old: DataFrame, new: DataFrame, keys: list[str]) -> tuple[int, int, int]:
    """Inserted, deleted and updated keys between two (key, version) states: both states as one
    union grouped by key (one shuffle, where a full outer join shuffles each side)."""
    both = (
        old.select(*keys, "old", F.lit(None).cast(old.schema["old"].dataType).alias("new"))
        .unionByName(
            new.select(*keys, F.lit(None).cast(new.schema["new"].dataType).alias("old"), "new")
        )
        .groupBy(*keys)
        .agg(F.max("old").alias("old"), F.max("new").alias("new"))
    )
    counts = both.agg(
        F.count_if(F.col("old").isNull()).alias("inserted"),
        F.count_if(F.col("new").isNull()).alias("deleted"),
        F.count_if(
            F.col("old").isNotNull() & F.col("new").isNotNull() & (F.col("old") != F.col("new"))
        ).alias("updated"),
    ).first()
    assert counts is not None
    inserted, deleted, updated = (int(counts[c] or 0) for c in ("inserted", "deleted", "updated"))
    return inserted, deleted, updated
