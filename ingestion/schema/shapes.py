"""The shape of a table's items: which descriptors each path holds, which keys its maps have and
what its lists hold, and the Spark type that parses an item of that shape in ONE pass.

A shape comes from items read in plain Python (a sample of an export's first items).
``item_ddl`` is the type ``from_json`` parses an image with: a ``map<attribute, VALUE>`` whose
values are typed as deep as the shape goes. A VALUE keeps every descriptor (``S`` ... ``BS`` as
the generic ``values.VALUE_DDL`` does); its ``M`` is a ``map<key, VALUE>`` and its ``L`` an
``array<VALUE>`` where the shape saw maps with keys or lists with elements at that level, and the
raw JSON text otherwise. Maps stay maps, not structs, so a key the shape does not know is still
seen (and the item handed to the generic path), never silently dropped by the parser.

One VALUE type serves every path reached by the same steps (the union of their shapes): Spark types a map's
values alike, and so the type stays as small as the shape.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ingestion.dynamodb import values
from ingestion.schema.type_rules import Path_


@dataclass
class Shape:
    path: Path_
    types: set[str] = field(default_factory=set)  # the descriptors seen at the path
    children: dict[str, Shape] = field(default_factory=dict)  # a map's keys
    element: Shape | None = None  # a list's elements

    def walk(self):
        """This shape and every shape below it, parents first."""
        yield self
        for child in self.children.values():
            yield from child.walk()
        if self.element is not None:
            yield from self.element.walk()


def from_items(items: Iterable[dict[str, Any]]) -> list[Shape]:
    """The top-level shapes (one per attribute) of ``items`` (DynamoDB JSON, parsed). A value
    that is not one descriptor and its content adds nothing: any such value later is flagged."""
    top: dict[str, Shape] = {}
    for item in items:
        for name, value in item.items():
            _see(top.setdefault(name, Shape((name,))), value)
    return list(top.values())


def _see(shape: Shape, value: Any) -> None:
    if not isinstance(value, dict) or len(value) != 1:
        return
    ((kind, content),) = value.items()
    if kind not in values.DESCRIPTORS:
        return
    shape.types.add(kind)
    if kind == "M" and isinstance(content, dict):
        for key, child in content.items():
            _see(shape.children.setdefault(key, Shape((*shape.path, key))), child)
    elif kind == "L" and isinstance(content, list):
        for element in content:
            if shape.element is None:
                shape.element = Shape((*shape.path, None))
            _see(shape.element, element)


def size(top: list[Shape]) -> int:
    """How many paths the shape has."""
    return sum(1 for t in top for _ in t.walk())


def value_ddl(level: list[Shape]) -> str:
    """The VALUE type of every value of the shapes ``level`` (all those of one route)."""
    below = [c for s in level for c in s.children.values()]
    elements = [s.element for s in level if s.element is not None]
    mapped = f"map<string,{value_ddl(below)}>" if below else "string"
    listed = f"array<{value_ddl(elements)}>" if elements else "string"
    return values.value_ddl(mapped, listed)


def item_ddl(top: list[Shape]) -> str:
    """The type of a whole item (``map<attribute, VALUE>``) of the shape ``top``."""
    return f"map<string,{value_ddl(top)}>"


def route(path: Path_) -> tuple[str, ...]:
    """The steps below the attribute as ``M`` (a map's key) or ``L`` (a list's element): paths
    with one route share one VALUE type (``value_ddl`` recurses by route)."""
    return tuple("L" if step is None else "M" for step in path[1:])


def typed_routes(top: list[Shape]) -> dict[tuple[str, ...], tuple[bool, bool]]:
    """Per route: whether VALUE's ``M`` is a typed map and its ``L`` a typed list there
    (``value_ddl``'s choice), so that expressions know which of the two they read."""
    routes: dict[tuple[str, ...], tuple[bool, bool]] = {}
    for shape in (s for t in top for s in t.walk()):
        maps, lists = routes.get(route(shape.path), (False, False))
        routes[route(shape.path)] = (
            maps or bool(shape.children),
            lists or shape.element is not None,
        )
    return routes
