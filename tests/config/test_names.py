"""Physical names are written once (ingestion/config/names.py); every mirror of them agrees."""

from __future__ import annotations

import yaml
from support import ROOT

from ingestion.config import names
from ingestion.config.names import quote, quote_table

# dbt reads the namespaces from the variables settings.export_environment sets, with the same
# defaults as names.py.
STAGING_IN_DBT = "{{ env_var('LAKEHOUSE_STAGING_DATABASE', 'staging') }}"
FINAL_IN_DBT = "{{ env_var('LAKEHOUSE_FINAL_DATABASE', 'lakehouse') }}"


def test_quote_doubles_backticks() -> None:
    hostile = "x` string); drop table lakehouse.books; --"
    assert quote(hostile) == "`x`` string); drop table lakehouse.books; --`"
    assert quote_table("lake", "staging", "books") == "`lake`.`staging`.`books`"
    assert names.staging_table("books") == "`lake`.`staging`.`books`"
    assert names.final_table("books") == "`lake`.`lakehouse`.`books`"


def test_dbt_project_spells_the_names_as_python_does() -> None:
    project = yaml.safe_load((ROOT / "dbt_project.yml").read_text())
    variables = project["vars"]
    assert variables["lakehouse_catalog"] == names.CATALOG
    assert variables["lakehouse_staging_schema"] == names.STAGING
    assert variables["lakehouse_merge_log"] == names.MERGE_LOG
    summary_keys = variables["lakehouse_summary_keys"]
    assert summary_keys == {k: names.SUMMARY_KEYS[k] for k in summary_keys}
    assert set(summary_keys) == {"batch_id", "kind", "ledger"}
    assert variables["lakehouse_schema_property"] == names.SCHEMA_PROPERTY
    models = project["models"]["dynamodb_lakehouse"]
    assert models["staging"]["+schema"] == STAGING_IN_DBT
    assert models["marts"]["+schema"] == FINAL_IN_DBT


def test_the_macros_read_the_ledger_keys_only_through_the_vars() -> None:
    """No macro spells a snapshot-summary key itself: they reach it through
    ``vars.lakehouse_summary_keys`` (``_dynamodb_summary_key``), so the keys are written once."""
    spelled = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "macros").rglob("*.sql")
        if names.SUMMARY_PREFIX in p.read_text()
    ]
    assert spelled == []


def test_sources_and_profiles_name_the_same_catalog_and_namespaces() -> None:
    sources = yaml.safe_load((ROOT / "models/staging/dynamodb/__sources.yml").read_text())
    (source,) = sources["sources"]
    assert (source["name"], source["schema"]) == (names.SOURCE, STAGING_IN_DBT)
    assert (ROOT / "models/staging" / names.SOURCE).is_dir()
    profile = yaml.safe_load((ROOT / "profiles.yml").read_text())
    for target, output in profile["dynamodb_lakehouse"]["outputs"].items():
        conf = output["server_side_parameters"]
        assert conf["spark.sql.defaultCatalog"] == names.CATALOG, target
        assert f"spark.sql.catalog.{names.CATALOG}" in conf, target
        assert output["schema"] == FINAL_IN_DBT, target
