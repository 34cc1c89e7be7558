"""Adopt new types: re-detect a table's schema from its staging change log and rebuild its columns.

The staging table keeps every item exactly (its typed columns and the remainder ``_rest``, which
``item_json`` encodes back to the item's DynamoDB JSON; or, staged before decision 0012, the whole
item in ``_image``), so its typed columns can always be derived again: ``rebuild`` detects the
schema from every staged item (column names already chosen are kept, and a person's declared
types in ``schemas/<table>.json``; every other type is detected anew), rewrites the staging table
from those items, with its remainder and without ``_image`` (a table of the older form moves to
the new one), in one commit that also keeps the new
types (``catalog.table_types``; Iceberg keeps the previous version; the ledger of applied
sources is carried in the new commit), then the dbt model is fully refreshed.

A replace commits over whatever another process appended meanwhile (a stream ingest on another
machine: ``rebuild`` holds the table's lock on this one, ``jobs.table_lock``). So ``rebuild``
reads one pinned snapshot and, after its commit, looks for staging commits made after that
snapshot, by lineage (descendants of the snapshot it read that the replace left off its branch;
never by commit time, which comes from other machines' clocks): their rows are missing from the
rebuilt table, and their change files may already be deleted. Each is staged again from its own
snapshot (still in the table's history) with its own ledger entry and taken out of the merge log
(a merge between the replace and the restage recorded it while its rows were missing), and the
run says so; if that fails, it fails loudly naming the snapshots to recover.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingestion import fault_points
from ingestion.catalog import (
    entity_types,
    ledger,
    merge_log,
    schema_choice,
    table_metadata,
    table_types,
)
from ingestion.config import names
from ingestion.dynamodb.entities import ENTITY_COLUMN, EntityRule, entity_sql, final_tables
from ingestion.dynamodb.tables import TableConfig
from ingestion.merge import full_refresh
from ingestion.schema import detect, item_json, schema_file, type_rules, types
from ingestion.schema.item_json import IMAGE
from ingestion.staging import append, staging_table
from ingestion.staging.retype import retyped

log = logging.getLogger(__name__)

REBUILT_FROM = names.SUMMARY_KEYS["rebuilt_from"]  # on a rebuild's replace: the snapshot it read
# On a rebuild's replace: the types kept just before it, which every commit it may have overwritten
# was staged with (kept types only grow between rebuilds): a restage reads those rows by them.
TYPES_BEFORE = names.SUMMARY_KEYS["types_before"]


@dataclass(frozen=True)
class Rebuilt:
    schema: types.Schema
    rows: int
    changed: tuple[str, ...]  # "attribute: old type -> new type"
    restaged: tuple[str, ...] = ()  # batches committed by others while it ran, staged again


@dataclass(frozen=True)
class Commit:
    """One staging snapshot as the lineage search sees it."""

    snapshot_id: int
    parent_id: int | None
    summary: dict[str, str]


def _commits(spark: SparkSession, name: str) -> list[Commit]:
    metadata = table_metadata.read(spark, name)  # no Spark job
    return [
        Commit(s.snapshot_id, s.parent_id, dict(s.summary))
        for s in (metadata.snapshots if metadata else [])
    ]


def _main_snapshot(spark: SparkSession, name: str) -> int:
    """The snapshot the table's ``main`` branch points at (read from the refs, not by time)."""
    spark.sql(f"refresh table {name}")
    row = spark.table(f"{name}.refs").where("name = 'main'").select("snapshot_id").first()
    assert row is not None  # a staging table exists only with its first commit
    return int(row["snapshot_id"])


def lost_commits(commits: list[Commit], read_id: int, head_id: int) -> list[Commit]:
    """The staging commits a replace overwrote, by lineage: descendants of ``read_id`` (the
    snapshot the rebuild read) that are not ancestors of ``head_id`` (the branch after the
    replace), oldest first. No clock is compared: commit times come from different processes
    and machines."""
    by_id = {c.snapshot_id: c for c in commits}

    def ancestry(snapshot: int | None) -> list[int]:
        chain = []
        while snapshot is not None and snapshot in by_id and snapshot not in chain:
            chain.append(snapshot)
            snapshot = by_id[snapshot].parent_id
        return chain

    kept = set(ancestry(head_id))
    lost = []
    for commit in commits:
        line = ancestry(commit.snapshot_id)
        if commit.snapshot_id not in kept and read_id in line[1:]:
            lost.append((len(line), commit))
    return [c for _depth, c in sorted(lost, key=lambda x: x[0]) if ledger.SOURCE in c.summary]


def _detected(table: TableConfig, staged: DataFrame, previous: types.Schema | None) -> types.Schema:
    """Every staged image's types (of one entity's rows, for an entity's table), the column
    names chosen already and a person's declared types kept."""
    kept = schema_file.declared_entries(schema_file.table_schema_file(table))
    for attribute in previous.attributes if previous else ():
        kept.setdefault(attribute.name, {"column": attribute.column})
    stats = detect.statistics(staged.select("_image"))
    resolved = type_rules.resolve(table.name, stats, table.key_descriptors, kept, source="staging")
    return schema_choice.with_keys(table, resolved)


def _changed(previous: types.Schema | None, detected: types.Schema) -> tuple[str, ...]:
    """``attribute: old -> new`` of each type that changed (``entity.attribute`` in a section)."""
    pairs = [("", previous, detected)] + [
        (f"{e.table}.", previous.entity(e.table) if previous else None, e)
        for e in detected.entities
    ]
    return tuple(
        f"{prefix}{a.name}: {was.type.sql()} -> {a.type.sql()}"
        for prefix, old, new in pairs
        for a in new.attributes
        if old is not None and (was := old.get(a.name)) is not None and was.type != a.type
    )


def _entities_of_keys(
    staged: DataFrame, rule: EntityRule, table: TableConfig, previous: types.Schema | None
) -> tuple[DataFrame, bool]:
    """Under a key rule: each row's ``_entity`` derived again from its key (one staged when a key
    with no ``#`` went to the unmatched table moves), and whether any row moves (a Spark job).
    The key is read from its own column, never from the item: a filter on ``_entity`` (this
    one, and each entity's detection) is pushed below the projection that makes it, where an
    expression of ``_image`` would be the item's whole encoding written out again."""
    derived = F.expr(entity_sql(rule))
    column = next(k.column for k in table.keys if k.name == rule.attribute)
    if previous is not None and (kept := previous.get(rule.attribute)) is not None:
        column = kept.column  # the column its types name (a schema file may rename it)
    text = F.col(names.quote(column)).cast("string").alias("S")
    attrs = F.create_map(F.lit(rule.attribute), F.struct(text))
    with_attrs = staged.withColumn("_attrs", attrs)
    moves = with_attrs.where(~F.col(ENTITY_COLUMN).eqNullSafe(derived)).limit(1).count() > 0
    rederived = with_attrs.withColumn(ENTITY_COLUMN, derived).drop("_attrs")
    return rederived.select(*staged.columns), moves


def _same_types(previous: types.Schema | None, detected: types.Schema) -> bool:
    """Every attribute (and every entity section's) has the name, column and type it had."""
    if previous is None:
        return False
    pairs = [(previous, detected)] + [(previous.entity(e.table), e) for e in detected.entities]
    return all(old is not None and old.attributes == new.attributes for old, new in pairs)


def rebuild_staging(
    spark: SparkSession,
    table: TableConfig,
    before_commit: Callable[[], None] | None = None,
    after_commit: Callable[[], None] | None = None,
    only_if_changed: bool = False,
) -> Rebuilt | None:
    """Rebuild ``staging.<table>`` from its items with freshly detected types (a person's
    declared types and chosen names kept). ``before_commit`` runs between the read and the
    commit, ``after_commit`` between the replace and the restage (the race tests' other
    writers). ``only_if_changed``: None, and nothing written, when the detected types are the
    ones staging holds (drift adoption: a misfit under a type a person declared inside an
    attribute, which re-detection keeps, is not adopted by rewriting the same types)."""
    name = names.staging_table(table.name)
    if not spark.catalog.tableExists(names.staging_table(table.name)):
        raise append.StagingError(f"{table.name}: nothing staged yet, nothing to rebuild")
    read_id = _main_snapshot(spark, name)
    carried = ledger.carried(spark, table.name)
    previous = table_types.current_schema(spark, table)
    staged = spark.read.option("snapshot-id", read_id).table(name)
    if previous is not None:  # the items: a table staged before decision 0012 keeps them whole
        staged = item_json.with_staged_image(staged, previous)
    elif IMAGE not in staged.columns:
        raise append.StagingError(
            f"{table.name}: no types are kept with {name}, and its rows have no _image: nothing "
            "to rebuild from"
        )
    moved = False
    if table.entities is not None and table.entities.by == "key":
        staged, moved = _entities_of_keys(staged, table.entities, table, previous)
    if table.entities is None:
        detected = _detected(table, staged, previous)
    else:  # each entity's types from its own staged rows (their `_entity`, kept)
        entity = F.col(ENTITY_COLUMN)
        detected = entity_types.combined(
            table,
            [
                _detected(
                    e, staged.where(entity == e.name), previous.entity(e.name) if previous else None
                )
                for e in entity_types.entity_tables(table)
            ],
        )
    changed = _changed(previous, detected)
    if only_if_changed and not moved and _same_types(previous, detected):
        return None
    rows = retyped(staged, detected, table)
    writer = rows.writeTo(name)
    properties = {
        **staging_table.TABLE_PROPERTIES,
        table_types.PROPERTY: table_types.document(detected),  # the types, in the same commit
    }
    if moved or full_refresh.entities_moved(spark, table.name):
        properties[staging_table.ENTITIES_MOVED] = "true"  # until the final tables are rebuilt
    for key, value in properties.items():
        writer = writer.tableProperty(key, value)
    if before_commit is not None:
        before_commit()
    fault_points.point("before-rebuild-commit")
    before = table_types.stored_schema(spark, table) or previous  # read fresh: others may add
    try:
        writer = writer.partitionedBy(F.days("_ingested_at"))
        writer = writer.option(f"snapshot-property.{ledger.LEDGER}", carried)
        writer = writer.option(f"snapshot-property.{REBUILT_FROM}", str(read_id))
        if before is not None:
            writer = writer.option(
                f"snapshot-property.{TYPES_BEFORE}", table_types.document(before)
            )
        writer.createOrReplace()
    except Exception as exc:
        raise append.StagingError(
            f"{table.name}: staging not rebuilt (unchanged): {append.spark_reason(exc)}"
        ) from exc
    fault_points.point("after-rebuild-commit")
    if after_commit is not None:
        after_commit()
    name_lost = lost_commits(_commits(spark, name), read_id, _main_snapshot(spark, name))
    restaged = restage_lost_commits(spark, table, detected, name_lost, before)
    count = spark.table(name).count()
    log.info(
        "%s: staging rebuilt with %d rows; %d column types changed", table.name, count, len(changed)
    )
    return Rebuilt(detected, count, changed, restaged)


def by_id_get(commits: list[Commit], snapshot_id: int) -> Commit | None:
    return next((c for c in commits if c.snapshot_id == snapshot_id), None)


def recover_lost_commits(spark: SparkSession, table: TableConfig) -> tuple[str, ...]:
    """The restage of every rebuild on the table's branch done, if a rebuild was killed (or
    failed) between its replace and its restage: the commits it overwrote are found again from
    the snapshot it read (kept in its replace's summary), and those whose rows are not in the
    table are staged again. Run before every merge; nothing to do is the usual answer."""
    name = names.staging_table(table.name)
    if not spark.catalog.tableExists(name):
        return ()
    commits = _commits(spark, name)
    if not any(REBUILT_FROM in c.summary for c in commits):
        return ()
    head = _main_snapshot(spark, name)
    by_id, on_branch, current = {c.snapshot_id: c for c in commits}, [], by_id_get(commits, head)
    while current is not None and current not in on_branch:
        on_branch.append(current)
        current = by_id.get(current.parent_id) if current.parent_id is not None else None
    replaces = [c for c in on_branch if REBUILT_FROM in c.summary]
    schema = table_types.current_schema(spark, table)
    restaged: list[str] = []
    for replace in replaces:
        lost = lost_commits(commits, int(replace.summary[REBUILT_FROM]), head)
        if lost and schema is not None:
            kept = replace.summary.get(TYPES_BEFORE)  # none: a replace that kept no types
            before = table_types.parse(kept, table) if kept else None
            restaged += restage_lost_commits(
                spark, table, schema_choice.with_keys(table, schema), lost, before
            )
    return tuple(restaged)


def restage_lost_commits(
    spark: SparkSession,
    table: TableConfig,
    schema: types.Schema,
    lost: list[Commit],
    staged_with: types.Schema | None,
) -> tuple[str, ...]:
    """Stage again, each from its own snapshot, the staging commits a replace overwrote (made
    by another process after the rebuild read its snapshot, found by lineage) whose rows the
    table does not hold; each taken out of the merge log before and after (a merge that ran
    between the replace and the restage recorded it as merged while its rows were missing).
    Their items are read by ``staged_with``, the types kept just before the replace."""
    name = names.staging_table(table.name)
    restaged = []
    for commit in lost:
        batch = commit.summary[ledger.BATCH]
        spark.sql(f"refresh table {name}")
        if not spark.table(name).where(F.col("_batch_id") == batch).limit(1).isEmpty():
            continue  # staged again already (by this rebuild, or a recovery before)
        for final in final_tables(table):  # a single-table design's: each entity table's
            merge_log.forget(spark, final.name, [batch])
        properties = {k: v for k, v in commit.summary.items() if k.startswith(names.SUMMARY_PREFIX)}
        try:
            staged = spark.read.option("snapshot-id", commit.snapshot_id).table(name)
            rows = retyped(staged.where(F.col("_batch_id") == batch), schema, table, staged_with)
            (
                rows.writeTo(name)
                .option("merge-schema", "true")
                .options(**{f"snapshot-property.{k}": v for k, v in properties.items()})
                .append()
            )
        except Exception as exc:
            raise append.StagingError(
                f"{table.name}: batch {batch} was committed while rebuild ran (snapshot "
                f"{commit.snapshot_id}) and could not be staged again: "
                f"{append.spark_reason(exc)}. Its rows are in that snapshot: do not expire "
                "snapshots (maintain) before it is restored"
            ) from exc
        log.warning("%s: batch %s was committed while rebuild ran: staged again", table.name, batch)
        restaged.append(batch)
        for final in final_tables(table):  # a single-table design's: each entity table's
            merge_log.forget(spark, final.name, [batch])
    return tuple(restaged)
