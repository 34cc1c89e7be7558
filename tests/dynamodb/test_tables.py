"""Table configuration, the committed dbt files, and add-table (no Spark needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from support import ROOT

from ingestion.dynamodb.entities import final_tables
from ingestion.dynamodb.tables import (
    TableConfigError,
    check_distinct,
    entry_keys_table,
    get_table,
    load_tables,
    table_from_entry,
)
from ingestion.project import onboarding, scaffold


def test_sample_tables_are_configured() -> None:
    tables = load_tables()
    assert [k.column for k in tables["books"].keys] == ["id"]
    assert [k.column for k in tables["orders"].keys] == ["customer_id", "order_id"]
    assert tables["orders"].key_descriptors == {"customer_id": "S", "order_id": "S"}
    assert (tables["books"].buckets, tables["orders"].buckets) == (None, 16)


def test_committed_models_are_what_add_table_renders() -> None:
    for table in load_tables().values():
        for path, content in scaffold.files_for(table, ROOT).items():
            assert path.read_text() == content, f"{path} differs from scaffold.py's rendering"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({}, "partition_key is required"),
        ({"partition_key": "id"}, "must be ATTRIBUTE:TYPE"),
        ({"partition_key": "id:BOOL"}, "must be ATTRIBUTE:TYPE"),
        ({"partition_key": "id:S", "attributes": {"x": "S"}}, "live in the table's schema file"),
        ({"partition_key": "id:S", "sort_key": "ID:N"}, "map to one column 'id'"),
        ({"partition_key": "id:S", "buckets": 1}, "buckets is 1; expected a whole number"),
        ({"partition_key": "id:S", "buckets": "16"}, "buckets is '16'"),
        ({"partition_key": "id:S", "buckets": 4096}, "from 2 to 1024"),
        ({"partition_key": "id:S", "adopt_drift": "no"}, "adopt_drift is 'no'; expected true or"),
        ({"partition_key": "id:S", "heal": "yes"}, "heal is 'yes'; expected true or false"),
        (
            {"partition_key": "id:S", "verify": "monthly"},
            "verify is 'monthly'; expected one of weekly, daily, off",
        ),
        (
            {"partition_key": "id:S", "cadence": "hourly"},
            "cadence is 'hourly'; expected one of daily, stream",
        ),
        (
            {"partition_key": "id:S", "ttl_deletes": "drop"},
            "ttl_deletes is 'drop'; expected one of delete, keep",
        ),
        ({"partition_key": 5}, "key '5' must be ATTRIBUTE:TYPE"),
        ({"partition_key": ""}, "key '' must be ATTRIBUTE:TYPE"),
        (
            {"partition_key": ["id:S"]},
            r"partition_key is \['id:S'\]: Input should be a valid string",
        ),
        (
            {"partition_key": "id:S", "colour": "red", "size": 1},
            r"unknown key\(s\) colour, size; a table entry may hold partition_key, sort_key",
        ),
        (
            {"partition_key": "id:S", "export_to": "http://b/p"},
            "export_to must be s3://BUCKET/PREFIX",
        ),
        ({"partition_key": "id:S", "table_arn": "arn:aws:s3:::b"}, "is no DynamoDB table ARN"),
        (
            {
                "partition_key": "id:S",
                "table_arn": "arn:aws:dynamodb:eu-west-1:123456789012:table/other",
            },
            "table_arn names table 'other', but this entry is DynamoDB table 't'",
        ),
        ({"partition_key": "id:S", "dynamodb_table": "x"}, "is no DynamoDB table name"),
    ],
)
def test_invalid_entries_are_refused(entry: dict, message: str) -> None:
    with pytest.raises(TableConfigError, match=message):
        table_from_entry("t", entry)


def test_an_entry_that_is_no_mapping_is_refused() -> None:
    with pytest.raises(TableConfigError, match="table t: its entry is 'id:S'; expected keys"):
        table_from_entry("t", "id:S")  # type: ignore[arg-type]


def test_a_number_for_a_name_is_its_text() -> None:
    assert (
        table_from_entry("t", {"partition_key": "id:S", "dynamodb_table": 2024}).dynamodb_name
        == "2024"
    )


def test_an_entry_takes_its_defaults_and_a_bare_off() -> None:
    assert table_from_entry("t", {"partition_key": "id:S", "sort_key": ""}).sort_key is None
    table = table_from_entry("t", {"partition_key": "id:S", "sort_key": None, "verify": False})
    assert (table.sort_key, table.verify, table.cadence, table.ttl_deletes) == (
        None,
        "off",
        "daily",
        "delete",
    )
    assert (table.adopt_drift, table.heal, table.buckets, table.entities) == (
        True,
        False,
        None,
        None,
    )


def test_the_docs_list_every_entry_key_as_the_model_does() -> None:
    """docs/tables-and-types.md's table of entry keys is TableConfig's rendering: a key added,
    renamed or re-described in the model and not in the docs fails here."""
    doc = (ROOT / "docs" / "tables-and-types.md").read_text()
    start = doc.index("\n", doc.index("<!-- entry-keys:start")) + 1
    assert doc[start : doc.index("<!-- entry-keys:end -->")] == entry_keys_table()


def test_unknown_table_names_the_fix() -> None:
    with pytest.raises(TableConfigError, match="add-table nope --partition-key"):
        get_table("nope")


def test_add_table_writes_config_source_and_models(project_copy: Path) -> None:
    before = (project_copy / "dbt_project.yml").read_text()
    written = onboarding.add_table("sessions", "user_id:S", "started_at:N", buckets=8)
    assert (project_copy / "models/marts/sessions.sql").is_file()
    assert (project_copy / "models/staging/dynamodb/stg_dynamodb__sessions.sql").is_file()
    assert len(written) == 6
    after = (project_copy / "dbt_project.yml").read_text()
    assert after.startswith(before.rstrip("\n"))  # appended: comments kept
    table = load_tables(project_copy / "dbt_project.yml")["sessions"]
    assert [k.column for k in table.keys] == ["user_id", "started_at"]
    assert table.buckets == 8
    sources = yaml.safe_load((project_copy / "models/staging/dynamodb/__sources.yml").read_text())
    assert "sessions" in [t["name"] for t in sources["sources"][0]["tables"]]
    model_yml = yaml.safe_load((project_copy / "models/marts/sessions.yml").read_text())
    (test,) = model_yml["models"][0]["data_tests"]  # every check of the final table, one query
    assert test == {"dynamodb_final_table": {"arguments": {"table": "sessions"}}}


def test_add_table_refuses_duplicates_and_bad_keys_without_writing(project_copy: Path) -> None:
    before = (project_copy / "dbt_project.yml").read_text()
    with pytest.raises(onboarding.OnboardingError, match="already configured"):
        onboarding.add_table("books", "id:S", None)
    with pytest.raises(TableConfigError, match="ATTRIBUTE:TYPE"):
        onboarding.add_table("t2", "id:X", None)
    with pytest.raises(TableConfigError, match="is no DynamoDB table name"):
        onboarding.add_table("bad name!", "id:S", None)
    with pytest.raises(TableConfigError, match="must match"):  # a lakehouse name chosen badly
        onboarding.add_table("Good-Name", "id:S", None, lakehouse="Bad-Name")
    for reserved in ("dynamodb-lakehouse-merges", "dynamodb_lakehouse_leases", "books_rejects"):
        with pytest.raises(TableConfigError, match="is the project's own"):
            onboarding.add_table(reserved, "id:S", None)
    with pytest.raises(onboarding.OnboardingError, match="choose one with --name"):
        onboarding.add_table("T" * 200, "id:S", None)
    assert (project_copy / "dbt_project.yml").read_text() == before
    assert not (project_copy / "models/marts/t2.sql").exists()


def test_a_history_is_a_strict_boolean_and_no_other_final_table_may_take_its_name() -> None:
    shelf = table_from_entry("shelf", {"partition_key": "id:S", "history": True})
    assert shelf.history and not table_from_entry("other", {"partition_key": "id:S"}).history
    with pytest.raises(TableConfigError, match="history is .yes.; expected true or false"):
        table_from_entry("shelf", {"partition_key": "id:S", "history": "yes"})
    clash = table_from_entry("shelf__history", {"partition_key": "id:S"})
    with pytest.raises(TableConfigError, match="its history 'shelf__history'"):
        check_distinct([shelf, clash])
    check_distinct([table_from_entry("shelf", {"partition_key": "id:S"}), clash])
    entities = {
        "partition_key": "pk:S",
        "sort_key": "sk:S",
        "entities": {"key": "sk", "values": {"A": None}},
    }
    # A single-table design: one history per entity table, each clashing with a table so named.
    app = table_from_entry("app", {**entities, "history": True})
    assert [(f.name, f.history) for f in final_tables(app)] == [
        ("app__a", True),
        ("app__unmatched", True),
    ]
    with pytest.raises(TableConfigError, match="its history 'app__a__history'"):
        check_distinct([app, table_from_entry("app__a__history", {"partition_key": "id:S"})])
