"""The shape of a table's items, and detection's statistics in one pass over items of a
known shape.

**The shape**: which descriptors each path holds, which keys its maps have and what its lists
hold, and the Spark type that parses an item of that shape in ONE pass. A shape comes from items
read in plain Python (a sample of an export's first items). ``item_ddl`` is the type
``from_json`` parses an image with: a ``map<attribute, VALUE>`` whose values are typed as deep as
the shape goes. A VALUE keeps every descriptor (``S`` ... ``BS`` as the generic
``values.VALUE_DDL`` does); its ``M`` is a ``map<key, VALUE>`` and its ``L`` an ``array<VALUE>``
where the shape saw maps with keys or lists with elements at that level, and the raw JSON text
otherwise. Maps stay maps, not structs, so a key the shape does not know is still seen (and the
item handed to the generic path), never silently dropped by the parser. One VALUE type serves
every path reached by the same steps (the union of their shapes): Spark types a map's values
alike, and so the type stays as small as the shape.

**The statistics** (``statistics``): each image is parsed once with the shape's type; every
path of the shape is a column (a list's elements an array), and each (path, descriptor) adds a
count, the digits of its numbers and whether they fit ``bigint`` to ONE aggregation: no row per
value, no text parsed twice. An item the shape does not describe (an attribute, map key, list
element or descriptor it has not seen, a value with no or two descriptors, text that would not
parse) is flagged instead (``flagged``): the aggregation leaves it out and ``detect`` hands
exactly those items to the generic path, so the statistics are the same as the generic path's
over every item.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ingestion.dynamodb import values
from ingestion.dynamodb.decode import IMAGES, NOT_AN_ITEM
from ingestion.dynamodb.numbers import fits_long, number_digits
from ingestion.dynamodb.values import DESCRIPTORS, descriptor, field, sql_string
from ingestion.schema.type_rules import NodeStats, Path_

MISFIT = "__misfit"


def _one_descriptor(x: str) -> str:
    present = " + ".join(f"cast({field(x, d)} is not null as int)" for d in DESCRIPTORS)
    return f"({present}) = 1"


def _in(value: str, names: list[str]) -> str:
    if not names:
        return "false"
    return f"{value} in ({', '.join(sql_string(n) for n in names)})"


def _only_keys(m: str, names: list[str]) -> str:
    """SQL: the map ``m`` has no key outside ``names`` (compiled: no lambda)."""
    if not names:
        return f"size({m}) = 0"
    return (
        f"size(array_except(map_keys({m}), array({', '.join(sql_string(n) for n in names)}))) = 0"
    )


def _bad(x: str, shape: Shape, maps_typed: bool, lists_typed: bool) -> str:
    """SQL: the value ``x`` (not null) is not of ``shape``."""
    checks = [f"not {_one_descriptor(x)}", f"not {_in(descriptor(x), sorted(shape.types))}"]
    m, lst = field(x, "M"), field(x, "L")
    if maps_typed:
        checks.append(f"({m} is not null and not {_only_keys(m, sorted(shape.children))})")
    else:
        checks.append(f"({m} is not null and {m} != '{{}}')")
    if lists_typed:
        if shape.element is None:
            checks.append(f"({lst} is not null and size({lst}) > 0)")
    else:
        checks.append(f"({lst} is not null and {lst} != '[]')")
    return f"({' or '.join(checks)})"


class _Plan:
    """The columns of one pass: a column per path, the misfit flag, the statistics."""

    def __init__(self, top: list[Shape]):
        self.routes = typed_routes(top)
        self.levels: list[list[tuple[str, str]]] = []  # per depth: (column, expression)
        self.top = sorted(str(s.path[0]) for s in top)
        self.shapes = sorted(top, key=lambda s: str(s.path[0]))
        self.paths: list[tuple[Shape, str, bool]] = []  # shape, its column, an array?
        self._column: dict[Path_, tuple[str, bool]] = {}
        self._add(top)

    def _add(self, shapes: list[Shape]) -> None:
        if not shapes:
            return
        level: list[tuple[str, str]] = []
        below: list[Shape] = []
        for shape in shapes:
            column = f"__v{len(self.paths)}"
            path = shape.path
            if len(path) == 1:
                expression, many = f"`_a`[{sql_string(str(path[0]))}]", False
            else:
                parent, parent_many = self._column[path[:-1]]
                if path[-1] is None:
                    step = f"coalesce({field('x', 'L')}, array())"
                    expression = (
                        f"coalesce({field(parent, 'L')}, array())"
                        if not parent_many
                        else f"flatten(transform({parent}, x -> {step}))"
                    )
                    many = True
                else:
                    key = sql_string(str(path[-1]))
                    expression = (
                        f"{field(parent, 'M')}[{key}]"
                        if not parent_many
                        else f"transform({parent}, x -> {field('x', 'M')}[{key}])"
                    )
                    many = parent_many
            level.append((column, expression))
            self.paths.append((shape, column, many))
            # Children take the parent's expression, not its column: one projection computes
            # every path (each projection would copy the rows again).
            self._column[path] = (f"({expression})", many)
            below.extend(shape.children.values())
            if shape.element is not None:
                below.append(shape.element)
        self.levels.append(level)
        self._add(below)

    def misfit(self) -> str:
        """SQL: the item (``_a``) is not of the shape. One expression that follows the shape's
        tree, each value bound once by a lambda (``exists`` over a one-element array or over a
        list), so its size is linear in the shape's: never a copy of a parent's expression per
        path. The path columns are not read: a filter on the flag is pushed below the
        projection that makes them, where each column would become its whole expression, and
        ``_a`` the whole parse of the item, once per path (an item's plan of 8 MB for 24 paths)."""
        own = " or ".join(
            f"coalesce({self._misfit_of(f'a[{sql_string(str(s.path[0]))}]', s, 1)}, false)"
            for s in self.shapes
        )
        return (
            f"coalesce(exists(array(`_a`), a -> not {_only_keys('a', self.top)} or "
            f"{own or 'false'}), false)"
        )

    def _misfit_of(self, value: str, shape: Shape, depth: int) -> str:
        """SQL: ``value`` (a short expression over a lambda's variable) is not of ``shape``, at
        this path or below it."""
        maps_typed, lists_typed = self.routes[route(shape.path)]
        checks = [_bad(value, shape, maps_typed, lists_typed)]
        v = f"v{depth}"
        for key, child in sorted(shape.children.items()):
            entry = f"{field(value, 'M')}[{sql_string(key)}]"
            checks.append(f"exists(array({entry}), {v} -> {self._misfit_of(v, child, depth + 1)})")
        if shape.element is not None and lists_typed:
            listed = field(value, "L")
            checks.append(
                f"exists({listed}, {v} -> {self._misfit_of(v, shape.element, depth + 1)})"
            )
        below = " or ".join(f"coalesce({c}, false)" for c in checks)
        return f"({value} is not null and ({below}))"

    def statistics(self) -> list[tuple[Path_, str, list[F.Column]]]:
        """Per (path, descriptor): the aggregates count, integer digits, fraction digits and
        fits_long, over the items that fit."""
        out = []
        for shape, column, many in self.paths:
            for kind in sorted(shape.types):
                count, integer, fraction, fits = _row_statistics(f"`{column}`", kind, many)
                fit = f"not {MISFIT}"
                aggregates = [F.expr(f"sum(case when {fit} then {count} end)")]
                for how, sql in (("max", integer), ("max", fraction), ("bool_and", fits)):
                    aggregates.append(
                        F.lit(None)
                        if sql is None
                        else F.expr(f"{how}(case when {fit} then {sql} end)")
                    )
                out.append((shape.path, kind, aggregates))
        return out


def _row_statistics(
    column: str, kind: str, many: bool
) -> tuple[str, str | None, str | None, str | None]:
    """SQL over one item: how many values of the column are of descriptor ``kind``; for N and NS
    the most integer and fraction digits of their numbers and whether all fit ``bigint`` (null
    when there is no number). Top-level numbers compile; lists go through array functions."""
    integer, fraction = number_digits("e")
    if not many and kind == "N":
        number = field(column, "N")
        digits = number_digits(number)
        count = f"case when {number} is not null then 1 else 0 end"
        return (
            count,
            digits[0],
            digits[1],
            f"case when {number} is not null then {fits_long(number)} end",
        )
    if not many:
        count = f"case when {descriptor(column)} = '{kind}' then 1 else 0 end"
        numbers = f"filter(coalesce({field(column, 'NS')}, array()), e -> e is not null)"
    else:
        count = f"size(filter({column}, x -> x is not null and {descriptor('x')} = '{kind}'))"
        inner = "array(x.`N`)" if kind == "N" else "coalesce(x.`NS`, array())"
        numbers = f"filter(flatten(transform({column}, x -> {inner})), e -> e is not null)"
    if kind not in ("N", "NS"):
        return count, None, None, None
    return (
        count,
        f"array_max(transform({numbers}, e -> {integer}))",
        f"array_max(transform({numbers}, e -> {fraction}))",
        f"case when size({numbers}) > 0 then forall({numbers}, e -> {fits_long('e')}) end",
    )


def flagged(frame: DataFrame, top: list[Shape]) -> tuple[DataFrame, _Plan]:
    """The items of ``frame`` parsed with the shape ``top``, a column per path, and
    ``__misfit``. ``frame``: lines of an export or change file (``value``: the envelope and its
    image are parsed in one go), or images (``_image``, e.g. the staged ones)."""
    plan = _Plan(top)
    item = item_ddl(top)
    if "value" in frame.columns:
        envelope = f"struct<{','.join(f'`{name}`:{item}' for name in IMAGES)}>"
        image = ", ".join(f"`_line`.`{name}`" for name in IMAGES)
        not_an_item = f"raise_error(concat({sql_string(NOT_AN_ITEM)}, _source_file))"
        frame = frame.select(
            "value",
            F.from_json("value", envelope).alias("_line"),
            F.input_file_name().alias("_source_file"),
        ).select("value", F.expr(f"coalesce({image}, {not_an_item})").alias("_a"))
    else:
        frame = frame.select("_image", F.expr(f"from_json(`_image`, '{item}')").alias("_a"))
    text = "value" if "value" in frame.columns else "_image"
    paths = [F.expr(e).alias(c) for level in plan.levels for c, e in level]
    return frame.select(text, "_a", *paths).withColumn(MISFIT, F.expr(plan.misfit())), plan


def statistics(frame: DataFrame, plan: _Plan) -> tuple[int, int, dict[Path_, dict[str, NodeStats]]]:
    """(items, misfits, statistics of the items that fit) in one aggregation over ``frame``."""
    stats = plan.statistics()
    columns = [F.count(F.lit(1)), F.sum(F.col(MISFIT).cast("int"))]
    for _, _, aggregates in stats:
        columns.extend(aggregates)
    (row,) = frame.agg(*columns).collect()
    values = list(row)
    items, misfits, values = int(values[0]), int(values[1] or 0), values[2:]
    by_path: dict[Path_, dict[str, NodeStats]] = {}
    for i, (path, kind, _) in enumerate(stats):
        count, integer, fraction, fits = values[4 * i : 4 * i + 4]
        if count:
            by_path.setdefault(path, {})[kind] = NodeStats(int(count), integer, fraction, fits)
    return items, misfits, by_path


@dataclass
class Shape:
    path: Path_
    types: set[str] = dataclasses.field(default_factory=set)  # the descriptors seen at the path
    children: dict[str, Shape] = dataclasses.field(default_factory=dict)  # a map's keys
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


def steps(top: list[Shape]) -> int:
    """The steps below their attribute of every path of the shape, summed: the size of the
    pass's path expressions (each reads its route from the top)."""
    return sum(len(s.path) - 1 for t in top for s in t.walk())


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
