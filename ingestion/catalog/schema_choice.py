"""The types a batch is staged with, and what happens when its values do not fit them.

The table's types decide the columns: those kept with its staging table (``table_types``), or
before its first commit a complete schema file; with neither, the types of the first batch's
first items, proven on every item by the pass that stages it, or else detected from every item
(``schema_for``; a person's declared entries kept). When a later batch holds attributes the
types do not know, the write stops before its commit (``NewAttributes``); the new attributes
are detected from that batch, added to the types, and the batch is staged again: they become
new columns (``stage_with_evolution``). Exports and stream batches choose the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from pyspark.sql import DataFrame, SparkSession

from ingestion.catalog import entity_types, table_types
from ingestion.config import names
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb.tables import TableConfig
from ingestion.schema import detect, schema_file, types
from ingestion.spark import spark_config

log = logging.getLogger(__name__)

Images = Callable[[], DataFrame]
Staged = TypeVar("Staged")


class TypesDidNotHold(LakehouseError):
    """A batch holds values the types it was staged with do not describe; nothing of it was
    committed. Raised by the stage (``staging.append``), caught by ``stage_with_evolution``."""


class SampleMisfit(TypesDidNotHold):
    """Values the first items' types (``Schema.sampled``) do not describe."""


class NewAttributes(TypesDidNotHold):
    """Attributes the types do not hold yet."""


def with_keys(table: TableConfig, current: types.Schema) -> types.Schema:
    """The schema with every key of the table first (a schema file may leave keys out)."""
    declared = schema_file.declared_keys(table)
    keys = [
        current.get(k.name) or types.Attribute(k.name, k.column, declared[k.name], key=True)
        for k in table.keys
    ]
    rest = [a for a in current.attributes if a.name not in declared]
    rule = None if table.staging else table.entities  # an entity's section holds no rule
    return replace(current, attributes=tuple(keys + rest), rule=rule)


def _declared(table: TableConfig) -> dict | None:
    return schema_file.declared_entries(schema_file.table_schema_file(table)) or None


def schema_for(
    spark: SparkSession, table: TableConfig, label: str, images: Images, source: str
) -> tuple[types.Schema, list[str]]:
    """The table's types (``table_types.current_schema``: kept with its staging table, or a
    complete schema file before the first commit); detected from ``images`` when there are none
    yet, a person's declared entries kept. They are kept with the staging table by the commit
    that stages the batch. Returns the schema and what changed, for the run summary.

    Decision: a first batch's types come from its first items (``detect.first_items_schema``),
    and the pass that stages the batch proves them on every item, failing before its commit on
    any value they would not describe exactly (``stage_with_evolution`` then detects the types
    from every item and stages again). A separate detection pass read the whole source before
    staging read it again: it cost more than the typed read of the export itself
    (docs/performance.md). The types are the same either way; the counts kept with them are
    then those of the first items (``sampled`` in the kept document). Only for a first load: the
    staging table is then created by the commit that proves them (``staging_table``). A staging
    table without kept types has its columns already: its types come from every item."""
    current = table_types.current_schema(spark, table)
    if current is not None:
        return with_keys(table, current), []
    if spark.catalog.tableExists(names.staging_table(table.name)):
        return _detected_whole(table, label, images, source)
    sampled: types.Schema | None
    if table.entities is not None:  # each entity's first items, else that entity whole
        split = entity_types.per_entity(
            table,
            images,
            lambda t, lines: (
                detect.first_items_schema(lines(), t, _declared(t), source)
                or detect.detect_images(lines(), t, _declared(t), source)
            ),
        )
        if split.sampled is None:
            return with_keys(table, split), [f"schema detected from {label} ({split.items} items)"]
        sampled = split
    else:
        sampled = detect.first_items_schema(images(), table, _declared(table), source)
    if sampled is not None:
        changes = [
            f"schema detected from the first {sampled.items} items of {label}, checked on every "
            f"item as it was staged"
        ]
        return with_keys(table, sampled), changes + [f"conflict: {c}" for c in sampled.conflicts]
    return _detected_whole(table, label, images, source)


def _detected_whole(
    table: TableConfig, label: str, images: Images, source: str
) -> tuple[types.Schema, list[str]]:
    """The types detected from every item of ``images`` (a person's declared entries kept)."""
    detected = types_of_every_item(table, images, source)
    changes = [f"schema detected from {label} ({detected.items} items)"]
    changes += [f"conflict: {c}" for c in detected.conflicts]
    return with_keys(table, detected), changes


def types_of_every_item(table: TableConfig, images: Images, source: str) -> types.Schema:
    """Every item's types (per entity, for a single-table design)."""
    if table.entities is None:
        return detect.detect_images(images(), table, _declared(table), source)
    whole = lambda t, lines: detect.detect_images(lines(), t, _declared(t), source)  # noqa: E731
    return entity_types.per_entity(table, images, whole)


def add_new_attributes(
    table: TableConfig, label: str, images: Images, source: str, current: types.Schema
) -> tuple[types.Schema, list[str]]:
    """Detect the attributes of ``images`` the schema lacks and add them to it (kept with the
    staging table by the append that stages them)."""
    detected = types_of_every_item(table, images, source)
    updated = entity_types.union(current, detected) or current
    added = entity_types.added(current, updated)
    for section in (updated, *updated.entities):
        types.check_columns(section)
    names = ", ".join(f"{a.name!r} ({a.column} {a.type.sql()})" for a in added)
    log.info("%s: new attributes in %s: %s", table.name, label, names)
    conflicts = [c for c in detected.conflicts if any(f"attribute {a.name!r}" in c for a in added)]
    return updated, [f"new columns: {names}"] + [f"conflict: {c}" for c in conflicts]


def stage_with_evolution(
    spark: SparkSession,
    stage: Callable[[types.Schema], Staged],
    table: TableConfig,
    label: str,
    images: Images,
    source: str,
    current: types.Schema,
) -> tuple[Staged, list[str]]:
    """``stage(current)``; when the batch holds attributes the schema lacks, add them to the
    schema file and stage again (the first attempt committed nothing). Types of the first items
    (``current.sampled``) that some value does not fit: the types detected from every item, and
    the batch staged again with them; the changes then say so after those of ``schema_for``
    (conflicts it reported already left out)."""
    try:
        with spark_config.quiet_task_failures(spark):
            return stage(current), []
    except TypesDidNotHold as exc:
        if current.sampled is not None:
            detected, changes = _detected_whole(table, label, images, source)
            log.info(
                "%s: the first %d items' types did not hold: %s", table.name, current.sampled, exc
            )
            note = (
                f"the first {current.sampled} items' types did not hold for every item of {label}"
            )
            told = {f"conflict: {c}" for c in current.conflicts}
            return stage(detected), [note, *(c for c in changes if c not in told)]
        if not isinstance(exc, NewAttributes):
            raise
    updated, added = add_new_attributes(table, label, images, source, current)
    return stage(updated), added
