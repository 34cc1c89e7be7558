"""Spark SQL expressions over one DynamoDB attribute value (built-in functions only, no UDF).

A value is parsed into ``VALUE``: a struct with one field per type descriptor. Maps and lists stay
as their DynamoDB JSON text and are parsed again only where a rule needs their content, so a flat
item is parsed once. An expression can't recurse, so nested values are walked by a loop:
``aggregate`` over ``sequence(1, 32)`` (DynamoDB's own nesting limit) carrying the work left, which
costs nothing once the work is done. The functions build SQL text, parsed by Spark in one ``F.expr``
call.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

DESCRIPTORS = ("S", "N", "B", "BOOL", "NULL", "SS", "NS", "BS", "M", "L")
MAX_DEPTH = 32  # DynamoDB supports up to 32 levels of nesting


def value_ddl(maps: str = "string", lists: str = "string") -> str:
    """The VALUE struct: one field per descriptor; ``M`` and ``L`` as JSON text unless typed
    (``maps``: ``map<string, VALUE>``, ``lists``: ``array<VALUE>``; ingestion.schema.shapes,
    ingestion.schema.typed_columns)."""
    return (
        "struct<`S`:string,`N`:string,`B`:string,`BOOL`:boolean,`NULL`:boolean,"
        f"`SS`:array<string>,`NS`:array<string>,`BS`:array<string>,`M`:{maps},`L`:{lists}>"
    )


VALUE_DDL = value_ddl()
ITEM_DDL = f"map<string,{VALUE_DDL}>"
LIST_DDL = f"array<{VALUE_DDL}>"


def sql_string(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def field(value: str, name: str) -> str:
    return f"{value}.`{name}`"


def parse_item(text: str) -> str:
    """DynamoDB JSON of an item (or of a map's content) -> ``map<name, VALUE>``."""
    return f"from_json({text}, '{ITEM_DDL}')"


def parse_map(value: str) -> str:
    return parse_item(field(value, "M"))


def parse_list(value: str) -> str:
    return f"from_json({field(value, 'L')}, '{LIST_DDL}')"


def is_absent(value: str) -> str:
    """No value, or DynamoDB's NULL: never decides a type, never a drift."""
    return f"({value} is null or coalesce({field(value, 'NULL')}, false))"


def descriptor(value: str) -> str:
    """The value's type descriptor (``S``, ``N``, ...), null for no value."""
    whens = " ".join(f"when {field(value, d)} is not null then '{d}'" for d in DESCRIPTORS)
    return f"(case {whens} end)"


# --- text and JSON rendering ------------------------------------------------------------------

# Plain JSON from DynamoDB JSON text, depth-independent: scalar wrappers are rewritten in one pass
# each, then maps and lists innermost first, one level per loop turn. Rewritten parts are marked
# with control characters (which JSON text never holds raw: they are escaped) so no rewritten text
# is ever taken for a wrapper: a map {"N": {"S": "5"}} stays a map with key N.
_DONE, _MAP_OPEN, _MAP_CLOSE, _LIST_OPEN, _LIST_CLOSE = "\x02", "\x03", "\x04", "\x05", "\x06"
_STRING = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_FLAT = rf"(?:{_STRING}|[^\"{{}}\[\]]++)*+"  # no brace or bracket outside strings: innermost
_SCALARS = (
    (r'\{"S":(' + _STRING + r")\}", _DONE + "$1"),
    (r'\{"B":("[^"]*+")\}', _DONE + "$1"),
    (r'\{"BOOL":(true|false)\}', _DONE + "$1"),
    (r'\{"NULL":true\}', _DONE + "null"),
    (r'\{"(?:SS|BS)":\[((?:' + _STRING + r",?)*+)\]\}", _LIST_OPEN + "$1" + _LIST_CLOSE),
    # a number set: unquote each element (\G continues where the previous element ended) ...
    (r'(\{"NS":\[|\G,)"([^"]*+)"', "$1$2"),
    (r'\{"NS":\[([^\]"]*+)\]\}', _LIST_OPEN + "$1" + _LIST_CLOSE),
    (r'\{"N":"([^"]*+)"\}', _DONE + "$1"),
)
_NESTED = (
    (r'\{"M":\{(' + _FLAT + r")\}\}", _MAP_OPEN + "$1" + _MAP_CLOSE),
    (r'\{"L":\[(' + _FLAT + r")\]\}", _LIST_OPEN + "$1" + _LIST_CLOSE),
)


def _replace(text: str, rules: tuple[tuple[str, str], ...]) -> str:
    for pattern, replacement in rules:
        text = f"regexp_replace({text}, {sql_string(pattern)}, {sql_string(replacement)})"
    return text


def dynamodb_to_json(text: str) -> str:
    """Plain JSON of one value's DynamoDB JSON text (``{"M": {...}}``): numbers as JSON numbers
    with their exact digits, binary as base64 strings, sets as arrays, key order kept. What
    Athena's ``json_extract`` reads. Null when nesting goes deeper than DynamoDB allows."""
    nested = sql_string(r'\{"[ML]":')
    loop = (
        f"aggregate(sequence(1, {MAX_DEPTH}), {_replace(text, _SCALARS)}, (acc, i) -> "
        f"case when acc rlike {nested} then {_replace('acc', _NESTED)} else acc end)"
    )
    markers = sql_string(_MAP_OPEN + _MAP_CLOSE + _LIST_OPEN + _LIST_CLOSE + _DONE)
    # The loop's result bound once (a one-element transform): the plan holds one copy of it.
    done = f"case when j rlike {nested} then null else translate(j, {markers}, '{{}}[]') end"
    return f"transform(array({loop}), j -> {done})[0]"


def _sorted_set_json(value: str) -> str:
    return (
        f"coalesce(to_json(array_sort({field(value, 'SS')})), "
        f"concat('[', array_join(array_sort({field(value, 'NS')}), ','), ']'), "
        f"to_json(array_sort({field(value, 'BS')})))"
    )


def text_sql(value: str) -> str:
    """A value as text, for ``string`` columns: S as is, N its exact digits, BOOL true/false,
    B its base64; sets as sorted JSON arrays, maps and lists as plain JSON. NULL -> null."""
    nested = (
        f"coalesce(concat('{{\"M\":', {field(value, 'M')}, '}}'), "
        f"concat('{{\"L\":', {field(value, 'L')}, '}}'))"
    )
    return (
        f"coalesce({field(value, 'S')}, {field(value, 'N')}, cast({field(value, 'BOOL')} as "
        f"string), "
        f"{field(value, 'B')}, {_sorted_set_json(value)}, "
        f"case when {field(value, 'M')} is not null or {field(value, 'L')} is not null "
        f"then {dynamodb_to_json(nested)} end)"
    )


# --- every value of an item, for schema detection ---------------------------------------------

_FRONTIER_DDL = f"array<struct<path:array<string>,value:{VALUE_DDL}>>"


def _children(value: str) -> str:
    """Children of a map or list as ``array<struct<key, value>>``; a list element's key is null."""
    from_list = (
        f"transform({parse_list(value)}, x -> named_struct('key', cast(null as string), "
        f"'value', x))"
    )
    return f"coalesce(map_entries({parse_map(value)}), {from_list})"


def _below(value: str, path: str) -> str:
    return (
        f"coalesce(transform({_children(value)}, "
        f"c -> named_struct('path', concat({path}, array(c.key)), 'value', c.value)), array())"
    )


def nested_values_sql(value: str, path: str) -> str:
    """``array<struct<path, value>>``: everything nested in a map or list value (not the value
    itself); a list element's path step is null. A loop over the work left, one level per turn;
    it only parses and collects: the statistics are computed on rows, by compiled code."""
    start = (
        f"cast(named_struct('frontier', {_below(value, path)}, 'found', array()) "
        f"as struct<frontier:{_FRONTIER_DDL},found:{_FRONTIER_DDL}>)"
    )
    step = (
        "named_struct("
        f"'frontier', flatten(transform(acc.frontier, f -> {_below('f.value', 'f.path')})), "
        "'found', concat(acc.found, acc.frontier))"
    )
    return (
        f"aggregate(sequence(1, {MAX_DEPTH}), {start}, "
        f"(acc, i) -> case when size(acc.frontier) = 0 then acc else {step} end, acc -> acc.found)"
    )


def _node(path: str, value: str) -> str:
    return (
        f"named_struct('path', {path}, 'value', {value}, "
        f"'done', {field(value, 'M')} is null and {field(value, 'L')} is null)"
    )


def expand_values(rows: DataFrame, levels: int = 4) -> DataFrame:
    """Rows ``name``, ``value`` (an item's attributes) -> rows ``path``, ``value``: every value,
    nested ones included (a list element's path step is null).

    The first ``levels`` levels are expanded by chained ``explode`` steps, which Spark compiles;
    anything deeper (rare) goes through the loop of ``nested_values_sql``, which alone is slower
    (docs/performance.md, "Schema detection")."""
    frame = rows.select(F.expr(_node("array(name)", "value")).alias("n"))
    for _ in range(levels):
        children = (
            f"transform({_children('n.value')}, "
            f"c -> {_node('concat(n.path, array(c.key))', 'c.value')})"
        )
        frame = frame.select(
            F.explode(
                F.expr(
                    "case when n.done then array(n) else "
                    f"concat(array(named_struct('path', n.path, 'value', n.value, 'done', true)), "
                    f"coalesce({children}, array())) end"
                )
            ).alias("n")
        )
    deeper = (
        "case when n.done then array(named_struct('path', n.path, 'value', n.value)) else "
        f"concat(array(named_struct('path', n.path, 'value', n.value)), "
        f"coalesce({nested_values_sql('n.value', 'n.path')}, cast(array() as {_FRONTIER_DDL}))) end"
    )
    return frame.select(F.explode(F.expr(deeper)).alias("v")).select("v.path", "v.value")
