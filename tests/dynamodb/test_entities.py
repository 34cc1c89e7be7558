"""A single-table design's entity rule: validated with the other keys of a table entry, its
final tables named by the lakehouse naming rule, and refused when one is another table's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ingestion.config import names
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb import tables
from ingestion.dynamodb.entities import EntityRuleError, final_tables

KEYS = {"partition_key": "pk:S", "sort_key": "sk:S"}


def entry(rule: Any) -> dict[str, Any]:
    return {**KEYS, "entities": rule}


def test_a_key_rule_names_each_entity_table_by_the_naming_rule_or_as_given() -> None:
    config = tables.table_from_entry(
        "app", entry({"key": "sk", "values": {"USER": None, "Order-Line": "lines", "9x": None}})
    )
    assert config.entities is not None
    assert config.entities.by == "key" and config.entities.attribute == "sk"
    assert [f.name for f in final_tables(config)] == [
        "app__user",
        "lines",
        "app__9x",
        "app__unmatched",
    ]
    assert all(f.staging == "app" for f in final_tables(config))
    assert final_tables(final_tables(config)[0]) == [final_tables(config)[0]]  # no re-split


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        ("sk", "must be a mapping"),
        ({"values": {"A": None}}, "exactly one of `key`"),
        ({"key": "sk", "attribute": "type", "values": {"A": None}}, "exactly one of `key`"),
        ({"key": "sk", "values": {"A": None}, "prefix": "#"}, "unknown key(s) prefix"),
        ({"key": "nope", "values": {"A": None}}, "key 'nope' is not a string (S) key"),
        ({"attribute": "sk", "values": {"A": None}}, "is a key; use `key: sk`"),
        ({"key": "sk", "values": {}}, "must list each entity value"),
        ({"key": "sk", "values": ["A"]}, "must list each entity value"),
        ({"key": "sk", "values": {"A#B": None}}, "is no entity value"),
        ({"key": "sk", "values": {"A": "Bad Name"}}, "which is no table name"),
        ({"key": "sk", "values": {"A": "app__unmatched"}}, "which is no table name"),
        ({"key": "sk", "values": {"a": None, "A": None}}, "both map to final table 'app__a'"),
        ({"attribute": "type", "values": {True: None}}, "quote the entity value"),
        ({"key": "sk", "values": {1: None}}, "YAML read it as int"),
    ],
)
def test_an_invalid_rule_is_refused_naming_what_to_write(rule: Any, says: str) -> None:
    with pytest.raises(EntityRuleError) as refused:
        tables.table_from_entry("app", entry(rule))
    assert says in str(refused.value)
    assert isinstance(refused.value, LakehouseError)


def test_a_numeric_sort_key_takes_no_key_rule() -> None:
    with pytest.raises(EntityRuleError, match="not a string"):
        tables.table_from_entry(
            "app",
            {
                "partition_key": "pk:S",
                "sort_key": "n:N",
                "entities": {"key": "n", "values": {"A": None}},
            },
        )


def write_project(path: Path, entries: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump({"vars": {"dynamodb_tables": entries}}))
    return path


def test_an_entity_table_named_as_another_table_is_refused_naming_both(tmp_path: Path) -> None:
    clash = {
        "app": entry({"key": "sk", "values": {"USER": "books"}}),
        "books": {"partition_key": "id:S"},
    }
    with pytest.raises(EntityRuleError, match="entity table 'books' is also table books's name"):
        tables.load_tables(write_project(tmp_path / "a.yml", clash))
    two = {
        "app": entry({"key": "sk", "values": {"USER": "people"}}),
        "crm": entry({"attribute": "type", "values": {"person": "people"}}),
    }
    with pytest.raises(EntityRuleError, match="'people' is also table app's name"):
        tables.load_tables(write_project(tmp_path / "b.yml", two))


def test_an_entity_table_reads_its_entrys_change_log(tmp_path: Path) -> None:
    project = {"app": entry({"attribute": "type", "values": {"user": None}})}
    tables.load_tables(write_project(tmp_path / "p.yml", project))
    assert names.staging_table("app__user") == names.staging_table("app")
    assert names.staging_table("app__unmatched").endswith("`app`")
    assert names.final_table("app__user").endswith("`app__user`")


def test_a_split_tables_schema_file_declares_per_entity_or_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from ingestion.schema import schema_file
    from ingestion.schema.types import SchemaError

    monkeypatch.setenv("LAKEHOUSE_SCHEMA_DIR", str(tmp_path))
    config = tables.table_from_entry("app", entry({"key": "sk", "values": {"USER": None}}))
    user = final_tables(config)[0]
    path = tmp_path / "app.json"
    path.write_text(
        json.dumps({"entities": {"app__user": {"attributes": {"n": {"type": "bigint"}}}}})
    )
    found = schema_file.table_schema_file(user)
    assert found is not None and found.typed["n"].type.sql() == "bigint"
    path.write_text(json.dumps({"entities": {"USER": {"attributes": {"n": {"type": "bigint"}}}}}))
    with pytest.raises(SchemaError, match="entities USER are no entity table of app's rule"):
        schema_file.table_schema_file(user)
    path.write_text(json.dumps({"attributes": {"pk": {"type": "string"}, "n": {"type": "bigint"}}}))
    with pytest.raises(
        SchemaError, match="n at the top: a single-table design declares per entity"
    ):
        schema_file.table_schema_file(user)
    path.write_text("{not json")
    with pytest.raises(SchemaError, match="not a readable JSON schema file"):
        schema_file.table_schema_file(user)
