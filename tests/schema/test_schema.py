"""The type rules and the schema file, from detection statistics (no Spark needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingestion.schema import schema_file, type_rules, types
from ingestion.schema.type_rules import NodeStats, Stats
from ingestion.schema.types import ColumnType, SchemaError


def N(
    count: int = 1, integer: int = 1, fraction: int = 0, fits_long: bool | None = None
) -> NodeStats:  # noqa: N802
    if fits_long is None:
        fits_long = fraction == 0 and integer <= 18
    return NodeStats(count, integer, fraction, fits_long)


def one(count: int = 1) -> NodeStats:
    return NodeStats(count)


def detect(
    by_path: dict, keys: dict | None = None, items: int = 10, overrides: dict | None = None
) -> types.Schema:
    return type_rules.resolve("t", Stats(items, by_path), keys or {}, overrides)


def type_of(by_path: dict, name: str = "a", **kwargs) -> str:
    attribute = detect(by_path, **kwargs).get(name)
    assert attribute is not None
    return attribute.type.sql()


@pytest.mark.parametrize(
    ("types", "expected"),
    [
        ({"S": one()}, "string"),
        ({"BOOL": one()}, "boolean"),
        ({"B": one()}, "binary"),
        ({"N": N(integer=18)}, "bigint"),
        ({"N": N(integer=19, fits_long=True)}, "bigint"),  # 9223372036854775807
        ({"N": N(integer=19, fits_long=False)}, "decimal(38,0)"),  # 9223372036854775808
        ({"N": N(integer=38)}, "decimal(38,0)"),  # 12345678901234567890123456789012345678
        ({"N": N(integer=0, fraction=18)}, "decimal(38,18)"),  # 0.000000000000000001
        ({"N": N(integer=3, fraction=2)}, "decimal(38,2)"),
        ({"N": N(integer=38, fraction=18)}, "string"),  # both in one attribute: exact text
        ({"N": N(integer=0, fraction=130)}, "string"),  # 1E-130
        ({"SS": one()}, "array<string>"),
        ({"BS": one()}, "array<binary>"),
        ({"NS": N(integer=2)}, "array<bigint>"),
        ({"NS": N(integer=2, fraction=3)}, "array<decimal(38,3)>"),
        ({"NULL": one(5)}, "string"),
        ({"S": one(), "NULL": one(9)}, "string"),  # NULL never decides
        ({"N": N(integer=2), "NULL": one(9)}, "bigint"),
        ({"N": N(), "S": one()}, "string"),  # conflict
        ({"BOOL": one(), "B": one(), "SS": one()}, "string"),
    ],
)
def test_scalar_and_set_rules(types: dict, expected: str) -> None:
    assert type_of({("a",): types}) == expected


def test_conflicts_are_reported() -> None:
    detected = detect({("price",): {"N": N(), "S": one()}, ("ok",): {"S": one()}})
    assert detected.conflicts == (
        "table t: attribute 'price': conflicting types N, S: stored as text",
    )
    assert detected.get("price").info["dynamodb_types"] == {"N": 1, "S": 1}


def test_never_double() -> None:
    for integer in range(0, 40):
        for fraction in range(0, 40, 3):
            rendered = type_rules.number_type(
                N(integer=integer, fraction=fraction, fits_long=False)
            ).sql()
            assert "double" not in rendered and "float" not in rendered


def test_map_becomes_struct_with_normalized_field_names() -> None:
    by_path = {
        ("m",): {"M": one(4)},
        ("m", "Created-By"): {"S": one(4)},
        ("m", "count"): {"N": N(3)},
        ("m", "inner"): {"M": one(2)},
        ("m", "inner", "deep list"): {"L": one(2)},
        ("m", "inner", "deep list", None): {"N": N(5, integer=1, fraction=1)},
    }
    attribute = detect(by_path).get("m")
    assert attribute.type.sql() == (
        "struct<`count`:bigint,`created_by`:string,"
        "`inner`:struct<`deep_list`:array<decimal(38,1)>>>"
    )
    fields = attribute.info["fields"]
    assert fields["Created-By"]["nullable"] is False and fields["count"]["nullable"] is True


@pytest.mark.parametrize(
    ("elements", "expected"),
    [
        ({"S": one(3)}, "array<string>"),
        ({"S": one(3), "NULL": one()}, "array<string>"),
        ({"S": one(), "N": N()}, "string"),  # mixed elements: JSON
        ({}, "string"),  # only empty lists: JSON
        ({"L": one()}, "array<array<bigint>>"),
    ],
)
def test_list_rules(elements: dict, expected: str) -> None:
    by_path = {("l",): {"L": one(3)}, ("l", None): elements}
    if "L" in elements:
        by_path[("l", None, None)] = {"N": N()}
    assert type_of(by_path, "l") == expected


def test_empty_maps_wide_maps_and_deep_nesting_are_json_text() -> None:
    assert type_of({("m",): {"M": one()}}, "m") == "string"
    wide = {("m",): {"M": one()}} | {
        ("m", f"k{i}"): {"S": one()} for i in range(types.MAX_FIELDS + 1)
    }
    assert type_of(wide, "m") == "string"
    deep: dict = {}
    path: tuple = ("d",)
    for _ in range(types.MAX_TYPED_DEPTH + 2):
        deep[path] = {"M": one()}
        path = path + ("x",)
    deep[path] = {"S": one()}
    rendered = type_of(deep, "d")
    assert rendered.count("struct<") == types.MAX_TYPED_DEPTH and rendered.endswith(
        ":string" + ">" * types.MAX_TYPED_DEPTH
    )


def test_colliding_names_fail_naming_both_and_the_fix() -> None:
    with pytest.raises(SchemaError) as failure:
        detect({("Title",): {"S": one()}, ("title",): {"S": one()}})
    message = str(failure.value)
    assert "'Title'" in message and "'title'" in message and '"column"' in message
    fixed = detect(
        {("Title",): {"S": one()}, ("title",): {"S": one()}},
        overrides={"Title": {"column": "title_upper"}},
    )
    assert [a.column for a in fixed.attributes] == ["title_upper", "title"]


def test_nested_collisions_and_metadata_names_fail() -> None:
    with pytest.raises(SchemaError, match="'A'.*'a'|'a'.*'A'"):
        detect({("m",): {"M": one()}, ("m", "A"): {"S": one()}, ("m", "a"): {"S": one()}})
    with pytest.raises(SchemaError, match="metadata column") as metadata:
        detect({("_Version",): {"N": N()}})
    assert metadata.value.attribute == "_Version"  # typed: drift adoption names it from here
    # The final table's own (decision 0014): the merge would write over the attribute's value.
    with pytest.raises(SchemaError, match="'_inserted_batch_id', a metadata column"):
        detect({("_Inserted Batch Id",): {"S": one()}})


def test_keys_take_their_declared_type() -> None:
    detected = detect(
        {("pk",): {"S": one(10)}, ("sk",): {"N": N(10, integer=5)}}, keys={"pk": "S", "sk": "N"}
    )
    # A numeric key is its canonical exact text whatever the data held (integers here): a later
    # key such as 2.5 or 1E+100 must fit it too.
    assert [(a.name, a.type.kind, a.type.sql(), a.key) for a in detected.attributes] == [
        ("pk", "string", "string", True),
        ("sk", "number", "string", True),
    ]
    with pytest.raises(SchemaError, match="declared S but the data also holds N") as mixed:
        detect({("pk",): {"S": one(), "N": N()}, ("pk2",): {"S": one()}}, keys={"pk": "S"})
    assert mixed.value.attribute == "pk"  # the attribute it is about, not only in its text
    wide = detect({("pk",): {"N": N(integer=38, fraction=5)}}, keys={"pk": "N"})
    assert wide.attributes[0].type.kind == "number"


def test_user_type_in_the_schema_file_wins() -> None:
    assert (
        type_of(
            {("m",): {"M": one()}, ("m", "k"): {"S": one()}},
            "m",
            overrides={"m": {"type": "string"}},
        )
        == "string"
    )


def _write(tmp_path: Path, document: dict) -> Path:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(document))
    return path


def test_full_schema_file_round_trips(tmp_path: Path) -> None:
    detected = detect(
        {
            ("id",): {"S": one(10)},
            ("m",): {"M": one(2)},
            ("m", "k"): {"N": N(2, integer=2, fraction=1)},
            ("l",): {"L": one()},
            ("l", None): {"M": one()},
            ("l", None, "x"): {"BOOL": one()},
            ("tags",): {"SS": one()},
        },
        keys={"id": "S"},
    )
    path = schema_file.write_schema(detected, tmp_path / "t.json")
    read = schema_file.read_schema_file(path, "t", type_rules.key_types([("id", "S")]))
    assert read.complete
    assert schema_file.from_file(read).attributes == detected.attributes


def test_simple_form_is_accepted(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        {"product_id": "S", "quantity": "N", "pages": "N bigint", "tags": "SS", "doc": "M"},
    )
    read = schema_file.read_schema_file(path, "t", {})
    types = {a.name: a.type.sql() for a in schema_file.from_file(read).attributes}
    assert types == {
        "product_id": "string",
        "quantity": "decimal(38,9)",
        "pages": "bigint",
        "tags": "array<string>",
        "doc": "string",
    }


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"x": "DATE"}, "unknown type descriptor 'DATE'"),
        ({"attributes": {"x": {"type": "double"}}}, "unknown type 'double'"),
        ({"attributes": {"x": {"type": "decimal(40,2)"}}}, "not a valid decimal"),
        ({"attributes": {"x": {"type": "struct"}}}, 'needs "fields"'),
        (
            {"attributes": {"A": {"type": "string"}, "a": {"type": "bigint"}}},
            "both map to column 'a'",
        ),
        ({"attributes": {"x": {"type": "string", "column": "_image"}}}, "metadata column"),
        ({"attributes": []}, "must be an object"),
    ],
)
def test_invalid_schema_files_name_the_problem(
    tmp_path: Path, document: dict, message: str
) -> None:
    with pytest.raises(SchemaError, match=message) as failure:
        schema_file.read_schema_file(_write(tmp_path, document), "t", {})
    # An entry's own error names its attribute (drift adoption's advice reads it); the file's
    # shape, and a collision of two, are about no one attribute.
    about = document.get("attributes", document) if isinstance(document, dict) else {}
    single = isinstance(about, dict) and len(about) == 1
    assert failure.value.attribute == (next(iter(about)) if single else None)


def test_entries_without_type_are_left_to_detection(tmp_path: Path) -> None:
    path = _write(
        tmp_path, {"attributes": {"Title": {"column": "title_upper"}, "n": {"type": "bigint"}}}
    )
    read = schema_file.read_schema_file(path, "t", {})
    assert not read.complete and set(read.typed) == {"n"}
    assert read.overrides["Title"] == {"column": "title_upper"}


def test_column_types_render_for_spark() -> None:
    nested = ColumnType(
        "struct",
        fields=(
            types.StructField(
                "a b", "a_b", ColumnType("array", element=ColumnType("decimal", 10, 2))
            ),
        ),
    )
    assert nested.sql() == "struct<`a_b`:array<decimal(10,2)>>"
    assert types.parse_type("array<array<bigint>>").sql() == "array<array<bigint>>"


def test_a_kept_document_prints_back_with_its_nested_detection_marks(tmp_path: Path) -> None:
    """`ddb-lakehouse schema` printed nested entries without `dynamodb_types` (their details
    were dropped when the kept document was read back), which marks them declared: saved as the
    schema file, every nested type was declared, and a wider nested value was never adopted."""
    detected = detect(
        {
            ("id",): {"S": one(10)},
            ("m",): {"M": one(2)},
            ("m", "c"): {"N": N(2, integer=2, fraction=3)},
            ("l",): {"L": one()},
            ("l", None): {"M": one()},
            ("l", None, "x"): {"BOOL": one()},
        },
        keys={"id": "S"},
    )
    document = schema_file.to_json(detected)
    assert "dynamodb_types" in document["attributes"]["m"]["fields"]["c"]
    keys = type_rules.key_types([("id", "S")])
    parsed = schema_file.parse_document(json.loads(json.dumps(document)), "kept", "t", keys)
    printed = schema_file.to_json(schema_file.from_file(parsed))
    assert printed["attributes"] == document["attributes"]
    # Saved as the schema file (to rename a column), nothing in it is declared.
    path = tmp_path / "t.json"
    path.write_text(json.dumps(printed))
    saved = schema_file.read_schema_file(path, "t", keys)
    assert not any(schema_file.is_declared(e) for e in _entries(saved.overrides.values()))
    assert schema_file.declared_entries(saved)["m"] == {
        "column": "m",
        "fields": {"c": {"column": "c"}},
    }


def _entries(entries) -> list:
    """Every entry, nested ones included."""
    found = []
    for entry in entries:
        found.append(entry)
        found += _entries((entry.get("fields") or {}).values())
        found += _entries([entry["element"]] if isinstance(entry.get("element"), dict) else [])
    return found


def test_what_glue_would_refuse_is_kept_as_json_text_or_refused_naming_the_limit() -> None:
    """Glue refuses a column name over 255 characters and a type over 131,072: a table with
    one fails every commit after it. A detected type that long is JSON text; a name that long,
    or a declared type, is refused before anything is staged, naming the limit and the fix."""
    long_fields = {("m",): {"M": one()}} | {
        ("m", f"{i:03d}" + "k" * 300): {"S": one()} for i in range(types.MAX_FIELDS)
    }
    schema = detect(long_fields)
    attribute = schema.get("m")
    assert attribute is not None and attribute.type.sql() == "string"
    assert "over the 131072 the Glue Data Catalog accepts" in attribute.info["note"]
    # Under the limit: a struct.
    assert type_of({("m",): {"M": one()}, ("m", "k"): {"S": one()}}, "m") == "struct<`k`:string>"

    name = "a" * 256
    with pytest.raises(
        SchemaError,
        match="column name of 256 characters, and the Glue Data Catalog refuses one over 255",
    ):
        detect({(name,): {"S": one()}})
    fixed = detect({(name,): {"S": one()}}, overrides={name: {"column": "a_long_one"}})
    assert [a.column for a in fixed.attributes] == ["a_long_one"]
    assert detect({("a" * 255,): {"S": one()}}).attributes[0].column == "a" * 255

    declared = {
        "type": "struct",
        "fields": {f"f{i}{'x' * 300}": {"type": "string"} for i in range(450)},
    }
    with pytest.raises(SchemaError, match="declared type is .* refuses a column type over 131072"):
        detect({("m",): {"M": one()}}, overrides={"m": declared})
