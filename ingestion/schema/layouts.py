"""Where a nested column's maps and lists can be parsed typed, so that its decode reads values
Spark's JSON parser filled directly instead of parsing the same text again at every level.

A struct column's map is decoded from ``VALUE.M``, an array column's list from ``VALUE.L``. In
the generic parse both are JSON text, parsed again where a column needs their content (a list of
maps: the item, the list's text, each element's text). A layout says, per route into a column
(the attribute, then its map's values, then their lists' elements...), whether ``M`` and ``L``
arrive typed (``map<key, VALUE>``, ``array<VALUE>``) or as text. They arrive typed only where
every column type met at that route needs them so: a ``string`` column there renders maps and
lists from their text, so a route holding one keeps the text. Maps stay maps (never structs), so
the decode still sees every key and a key the column lacks still makes the value not fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from ingestion.dynamodb.values import value_ddl
from ingestion.schema.types import ColumnType


@dataclass(frozen=True)
class Layout:
    """One route: whether ``M`` / ``L`` arrive typed, and the routes below them."""

    maps: Layout | None = None  # the route into a typed map's values; None: M is text
    lists: Layout | None = None  # the route into a typed list's elements; None: L is text

    def value_ddl(self) -> str:
        mapped = f"map<string,{self.maps.value_ddl()}>" if self.maps else "string"
        listed = f"array<{self.lists.value_ddl()}>" if self.lists else "string"
        return value_ddl(mapped, listed)

    @property
    def typed(self) -> bool:
        return self.maps is not None or self.lists is not None


TEXT = Layout()


def layout(types: list[ColumnType]) -> Layout:
    """The layout of a route where values of ``types`` are decoded."""
    if any(t.kind == "string" for t in types):
        return TEXT
    fields = [f.type for t in types if t.kind == "struct" for f in t.fields]
    elements = [t.element for t in types if t.kind == "array" and t.element is not None]
    return Layout(layout(fields) if fields else None, layout(elements) if elements else None)


def typed_attributes_ddl(columns: list[tuple[str, ColumnType]]) -> str | None:
    """The type that parses an item's nested attributes typed (``struct<name: VALUE>``, one
    field per attribute whose layout types anything), or None when none does."""
    typed = [(name, layout([t])) for name, t in columns]
    fields = [f"{_quote(name)}:{shape.value_ddl()}" for name, shape in typed if shape.typed]
    return f"struct<{','.join(fields)}>" if fields else None


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
