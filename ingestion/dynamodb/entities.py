"""A single-table design's entity rule: which final table each item of one DynamoDB table goes to.

A table entry's ``entities`` block (decision 0009) names either a key whose text before its
first ``#`` is the entity (``key: sk``: ``ORDER#7`` is ``ORDER``, and a key with no ``#`` is its
own value: ``PROFILE``, an entity's root item) or an attribute holding it (``attribute: type``),
and lists the entity values, each with its final table's name (null: ``<table>__<value>`` by the
column-name rule). An item whose value is not listed, or that lacks the attribute, goes to
``<table>__unmatched``.

Every staged change carries ``_entity``: the final table name of its entity, the unmatched
table's name, or null for a delete whose record carries only ``Keys`` under an attribute rule
(its entity cannot be told: every entity table treats it as a delete of the key).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ingestion.config import names
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb.naming import column_name
from ingestion.dynamodb.values import field, sql_string

RULES = ("key", "attribute")
UNMATCHED = "unmatched"
ENTITY_COLUMN = "_entity"
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,127}$")  # a lakehouse table name (tables._TABLE_NAME)


class EntityRuleError(LakehouseError):
    """A table entry's ``entities`` block is invalid."""


@dataclass(frozen=True)
class EntityRule:
    by: str  # "key": the text before the first '#' of a key (all without one); "attribute": a value
    attribute: str  # the key's or the attribute's DynamoDB name
    values: tuple[tuple[str, str], ...]  # (entity value, final table name), as listed
    unmatched: str  # the final table of items that match no value: <table>__unmatched

    @property
    def finals(self) -> tuple[str, ...]:
        """Every final table of the rule: one per entity value, then the unmatched table."""
        return tuple(final for _, final in self.values) + (self.unmatched,)

    def value_of(self, final: str) -> str | None:
        return next((value for value, name in self.values if name == final), None)


def final_tables(table: Any) -> list[Any]:
    """The final tables a table entry's change log feeds (``TableConfig``s): the entry itself,
    or one per entity of its rule, each named by its final table and reading the entry's."""
    rule = table.entities
    if rule is None or table.staging:  # no rule, or an entity's final table already
        return [table]
    return [table.model_copy(update={"name": f, "staging": table.name}) for f in rule.finals]


def register_finals(tables: list[Any]) -> None:
    """Record each entity table's change log (``names.STAGING_OF``), refusing an entity table
    that is another table's name, naming both."""
    names.STAGING_OF.clear()
    lakehouse = {t.name for t in tables}
    for table in tables:
        for final in table.entities.finals if table.entities else ():
            other = final if final in lakehouse else names.STAGING_OF.get(final)
            if other:
                raise EntityRuleError(
                    f"table {table.name}: entity table {final!r} is also table {other}'s name: "
                    "map the entity to another final table (entities: values)"
                )
            names.STAGING_OF[final] = table.name


def staged_under(rule: EntityRule, properties: dict[str, str]) -> bool:
    """Whether a change log (its table properties) was staged under ``rule``: the rule kept
    with its types (``names.SCHEMA_PROPERTY``) is this one."""
    text = properties.get(names.SCHEMA_PROPERTY)
    return text is not None and json.loads(text).get("rule") == rule_document(rule)


def rule_document(rule: EntityRule) -> dict[str, Any]:
    """The rule as it is kept with the staging table's types (``catalog.entity_types``)."""
    return {rule.by: rule.attribute, "values": dict(rule.values)}


def default_final(table: str, value: str) -> str:
    """``<table>__<value>``, the value by the column-name rule (``USER`` -> ``user``)."""
    return f"{table}__{column_name(value).strip('_') or 'entity'}"


def parse_rule(table: str, block: Any, keys: dict[str, str]) -> EntityRule | None:
    """The ``entities`` block of table ``table`` (``keys``: key attribute -> descriptor)."""
    if block is None:
        return None
    where = f"table {table}: entities"
    if not isinstance(block, dict):
        raise EntityRuleError(f"{where} must be a mapping with `key` or `attribute`, and `values`")
    unknown = sorted(set(block) - {"key", "attribute", "values"})
    if unknown:
        raise EntityRuleError(
            f"{where}: unknown key(s) {', '.join(unknown)}; it holds `key` or `attribute`, and "
            "`values`"
        )
    given = [by for by in RULES if block.get(by) not in (None, "")]
    if len(given) != 1:
        raise EntityRuleError(
            f"{where} needs exactly one of `key` (a key whose text before its first '#' is the "
            "entity) and `attribute` (an attribute holding it)"
        )
    by = given[0]
    attribute = str(block[by])
    if by == "key" and keys.get(attribute) != "S":
        raise EntityRuleError(
            f"{where}: key {attribute!r} is not a string (S) key of the table "
            f"(its keys: {', '.join(f'{k}:{d}' for k, d in keys.items())})"
        )
    if by == "attribute" and attribute in keys:
        raise EntityRuleError(
            f"{where}: attribute {attribute!r} is a key; use `key: {attribute}` for a key's prefix"
        )
    unmatched = f"{table}__{UNMATCHED}"
    if len(unmatched) > 128:
        raise EntityRuleError(f"{where}: {unmatched!r} is longer than a table name may be (128)")
    return EntityRule(by, attribute, _values(table, block.get("values"), by), unmatched)


def _values(table: str, values: Any, by: str) -> tuple[tuple[str, str], ...]:
    where = f"table {table}: entities: values"
    if not isinstance(values, dict) or not values:
        raise EntityRuleError(
            f"{where} must list each entity value, mapped to its final table's name or null "
            f"(null: {table}__<value>), e.g. {{USER: null, ORDER: orders}}"
        )
    pairs: list[tuple[str, str]] = []
    seen: dict[str, str] = {}
    for value, final in values.items():
        if not isinstance(value, str):  # YAML reads `ON`, `yes` or `01` as no string
            raise EntityRuleError(
                f"{where}: {value!r} is no text (YAML read it as {type(value).__name__}): "
                "quote the entity value as it is in DynamoDB, e.g. 'ON': null"
            )
        if not value or (by == "key" and "#" in value):
            raise EntityRuleError(
                f"{where}: {value!r} is no entity value (the text before a key's first '#')"
            )
        name = default_final(table, value) if final is None else str(final)
        if not _NAME.match(name) or name == f"{table}__{UNMATCHED}":
            raise EntityRuleError(
                f"{where}: {value!r} maps to {name!r}, which is no table name: 1 to 128 of "
                f"a-z, 0-9 and '_', starting with a letter, and not {table}__{UNMATCHED}"
            )
        other = seen.setdefault(name, value)
        if other != value:
            raise EntityRuleError(
                f"{where}: {other!r} and {value!r} both map to final table {name!r}: name one"
            )
        pairs.append((value, name))
    return tuple(pairs)


def value_sql(by: str, attribute: str) -> str:
    """SQL for a decoded line's entity value (``_attrs``: its image as a map): the text before
    the first ``#`` of the key ``attribute`` (the whole key when it has none: ``sk = PROFILE``
    is the root item of entity ``PROFILE`` in single-table designs), or the text of the
    attribute (null when absent or not a string)."""
    text = field(f"`_attrs`[{sql_string(attribute)}]", "S")
    if by == "key":
        return f"substring_index({text}, '#', 1)"
    return text


def entity_sql(rule: EntityRule) -> str:
    """SQL for ``_entity`` of a decoded line (``_attrs``: its image as a map; ``_line``: its
    envelope): the final table of its entity value, the unmatched table, or null for a record
    that carries only ``Keys`` and no attribute to tell its entity by (attribute rule)."""
    text = field(f"`_attrs`[{sql_string(rule.attribute)}]", "S")
    value = value_sql(rule.by, rule.attribute)
    # A map lookup names ``value`` once (``case value when ...`` repeats it in every branch, and
    # a filter on ``_entity`` pushed down below the parse would write the parse out in each).
    pairs = ", ".join(f"{sql_string(v)}, {sql_string(n)}" for v, n in rule.values)
    looked_up = f"element_at(map({pairs}), {value})" if pairs else "cast(null as string)"
    matched = f"coalesce({looked_up}, {sql_string(rule.unmatched)})"
    if rule.by == "key":
        return matched
    keys_only = "(`_line`.Item is null and `_line`.NewImage is null and `_line`.OldImage is null)"
    return f"case when {keys_only} and {text} is null then null else {matched} end"
