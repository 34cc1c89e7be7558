"""A single-table design's types (decision 0009): one schema per entity, detected from that
entity's own items only, kept with the one staging table in one document (a section per entity,
and the rule they follow).

The rule is kept with the types: a job whose configured rule is not the kept one stops, naming
the reset, so rows already staged are never read under another rule than the one that staged
them; so does a rule set on a table whose change log was staged without one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ingestion.config.errors import LakehouseError
from ingestion.dynamodb import decode
from ingestion.dynamodb.entities import (
    ENTITY_COLUMN,
    EntityRule,
    entity_sql,
    final_tables,
    rule_document,
    value_sql,
)
from ingestion.dynamodb.tables import TableConfig
from ingestion.dynamodb.values import parse_item
from ingestion.schema import schema_file, types

RESET = (
    "reset it: `ddb-lakehouse remove-table {table} --reset --yes` (its data goes, its "
    "configuration stays), then sync a full export (every change is then staged under the "
    "configured rule)"
)


class EntityRuleChanged(LakehouseError):
    """The configured entity rule is not the one the table's change log was staged under."""


def _kept_rule(raw: dict[str, Any]) -> dict[str, Any] | None:
    rule = raw.get("rule")
    return rule if isinstance(rule, dict) else None


def sections(schema: types.Schema, raw: Any, table: TableConfig, where: str) -> types.Schema:
    """``schema`` (a kept document's top level) with its entities' sections and rule, after
    checking that the configured rule is the kept one."""
    kept = _kept_rule(raw) if isinstance(raw, dict) else None
    rule = table.entities
    if rule is None and kept is None:
        return schema
    if rule is None:
        raise EntityRuleChanged(
            f"table {table.name}: its change log was staged under an entity rule ({kept}), "
            f"but its entry has no `entities`: restore the rule, or "
            f"{RESET.format(table=table.name)}"
        )
    if kept is None:
        raise EntityRuleChanged(
            f"table {table.name}: an entity rule is set, but its change log holds data staged "
            f"without one: take the rule out again, or {RESET.format(table=table.name)}"
        )
    if kept != rule_document(rule):
        raise EntityRuleChanged(
            f"table {table.name}: its entity rule is {rule_document(rule)}, but its change log "
            f"was staged under {kept}: restore that rule, or {RESET.format(table=table.name)}"
        )
    keys = schema_file.declared_keys(table)
    found = raw.get("entities") or {}
    entities = tuple(
        schema_file.from_file(
            schema_file.parse_document(found[final], f"{where}: entities: {final}", final, keys)
        )
        for _, final in rule.values
        if final in found
    )
    return replace(schema, entities=entities, rule=rule)


def union(kept: types.Schema, schema: types.Schema) -> types.Schema | None:
    """The kept types with the attributes of ``schema`` they lack (top level and per entity);
    None when there are none: a process never writes older types back."""
    added = [a for a in schema.attributes if kept.get(a.name) is None]
    entities, grew = list(kept.entities), bool(added)
    for section in schema.entities:
        old = kept.entity(section.table)
        if old is None:
            entities.append(section)
            grew = True
            continue
        new = [a for a in section.attributes if old.get(a.name) is None]
        if new:
            entities[entities.index(old)] = old.with_attributes(new)
            grew = True
    if not grew:
        return None
    return replace(kept.with_attributes(added), entities=tuple(entities), rule=schema.rule)


def added(old: types.Schema, new: types.Schema) -> list[types.Attribute]:
    """The attributes of ``new`` that ``old`` lacks, top level and per entity."""
    pairs = [(old, new)] + [(old.entity(e.table), e) for e in new.entities]
    return [
        a for was, now in pairs for a in now.attributes if was is None or was.get(a.name) is None
    ]


def entity_lines(lines: DataFrame, rule: EntityRule, final: str) -> DataFrame:
    """The lines (``value``: DynamoDB JSON) whose item is of the entity of final table
    ``final``: what that entity's types are detected from."""
    return (
        with_entity(lines, rule).where(F.col(ENTITY_COLUMN) == final).select("value")
        if rule
        else lines
    )


def with_entity(lines: DataFrame, rule: EntityRule | None = None) -> DataFrame:
    image = f"coalesce({', '.join(f'`_line`.{n}' for n in decode.IMAGES)})"
    parsed = lines.withColumn("_line", F.from_json(F.col("value"), decode.ENVELOPE))
    parsed = parsed.withColumn("_attrs", F.expr(parse_item(image)))
    return parsed.withColumn(ENTITY_COLUMN, F.expr(entity_sql(rule))) if rule else parsed


def value_counts(lines: DataFrame, by: str, attribute: str) -> dict[str | None, int]:
    """How many lines (``value``: DynamoDB JSON) hold each entity value (None: no such
    attribute): what ``detect-schema`` shows to write a rule from."""
    value = F.expr(value_sql(by, attribute)).alias("value")
    counted = with_entity(lines).select(value).groupBy("value").count().collect()
    return {row["value"]: int(row["count"]) for row in counted}


Detect = Callable[[TableConfig, Callable[[], DataFrame]], types.Schema]


def per_entity(table: TableConfig, images: Callable[[], DataFrame], detect: Detect) -> types.Schema:
    """``detect`` run for each entity of the table's rule (``table``: a rule-bearing entry) on
    that entity's lines only, the results as one schema: the keys, a section per entity."""
    rule = table.entities
    assert rule is not None
    parts = []
    for entity in entity_tables(table):

        def lines(final: str = entity.name) -> DataFrame:
            return entity_lines(images(), rule, final)

        parts.append(detect(entity, lines))
    return combined(table, parts)


def entity_tables(table: TableConfig) -> list[TableConfig]:
    """The entity tables of a table's rule that have typed columns (not the unmatched one)."""
    return final_tables(table)[:-1]


def combined(table: TableConfig, parts: list[types.Schema]) -> types.Schema:
    """The schema of a single-table design: the keys, and the entities' sections (``parts``)."""
    sampled = [s.sampled for s in parts if s.sampled is not None]
    conflicts = [f"{s.table}: {c}" for s in parts for c in s.conflicts]
    keys = tuple(a for a in parts[0].attributes if a.key)
    return types.Schema(
        table.name,
        keys,
        items=sum(s.items or 0 for s in parts),
        source=parts[0].source,
        conflicts=tuple(conflicts),
        sampled=max(sampled) if sampled else None,
        entities=tuple(parts),
        rule=table.entities,
    )
