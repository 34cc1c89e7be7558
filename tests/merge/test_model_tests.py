"""A final table's YAML that says dbt's `unique`/`not_null` stops the merge with one line
naming the scoped test, before any work."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from support import ROOT, with_old_key_test

from ingestion import cli
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb.tables import get_table
from ingestion.merge.model_tests import ModelTestError, check_model_tests
from ingestion.staging.exports import ingest_export


def _project_with(tmp_path: Path, tests: list[str]) -> Path:
    marts = tmp_path / "models" / "marts"
    marts.mkdir(parents=True)
    shutil.copy(ROOT / "models" / "marts" / "books.yml", marts / "books.yml")
    model = yaml.safe_load((marts / "books.yml").read_text())
    (key,) = [c for c in model["models"][0]["columns"] if c["name"] == "id"]
    key["data_tests"] = tests
    (marts / "books.yml").write_text(yaml.safe_dump(model))
    return tmp_path


def test_the_projects_own_models_use_the_scoped_tests() -> None:
    check_model_tests([get_table("books"), get_table("orders")], project=ROOT)


@pytest.mark.parametrize(
    ("old", "new"), [("unique", "dynamodb_unique"), ("not_null", "dynamodb_not_null")]
)
def test_a_model_with_dbts_own_key_test_is_refused_naming_the_new_one(
    tmp_path: Path, old: str, new: str
) -> None:
    project = _project_with(tmp_path, [old])
    with pytest.raises(ModelTestError) as refused:
        check_model_tests([get_table("books")], project=project)
    message = str(refused.value)
    assert isinstance(refused.value, LakehouseError)
    assert "\n" not in message
    assert f"models/marts/books.yml: column id tests `{old}`: write `{new}`" in message


@pytest.mark.slow
@pytest.mark.integration
def test_merge_stops_on_such_a_model_with_one_line_before_any_work(
    spark, clean_lakehouse, samples, project_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    books = get_table("books")
    ingest_export(spark, books, str(samples["books"]))
    path = project_copy / "models" / "marts" / "books.yml"
    described = "        description: DynamoDB partition key `id` (S).\n"
    assert described in path.read_text()
    path.write_text(
        path.read_text().replace(described, described + "        data_tests: [unique]\n")
    )
    assert cli.main(["merge", "--table", "books"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "error: models/marts/books.yml: column id tests `unique`: write `dynamodb_unique` (the "
        "same test at the cost of the merge; `add-table` writes it since the tests were renamed)\n"
    )
    assert not spark.catalog.tableExists("lake.lakehouse.books")  # nothing was merged


def test_the_scoped_tests_and_tests_with_arguments_pass(tmp_path: Path) -> None:
    project = _project_with(tmp_path, ["dynamodb_unique", {"accepted_values": {"values": ["a"]}}])
    check_model_tests([get_table("books")], project=project)


def test_the_renamed_combination_test_is_migrated_in_place_and_dbt_utils_left_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An `orders.yml` from before the rename says `unique_combination_of_columns`: the check
    rewrites that word (same test, same arguments) and says so; `dbt_utils.`'s test of that name
    is a user's own and stays."""
    marts = tmp_path / "models" / "marts"
    marts.mkdir(parents=True)
    shutil.copy(ROOT / "models" / "marts" / "orders.yml", marts / "orders.yml")
    new = with_old_key_test(marts / "orders.yml")
    old = (marts / "orders.yml").read_text()
    assert old != new
    theirs = (
        "\n      - dbt_utils.unique_combination_of_columns:\n          "
        "combination_of_columns: [a]\n"
    )
    (marts / "orders.yml").write_text(old + theirs)
    check_model_tests([get_table("orders")], project=tmp_path)
    assert (marts / "orders.yml").read_text() == new + theirs
    assert "models/marts/orders.yml: the test unique_combination_of_columns is now " in caplog.text
    caplog.clear()
    check_model_tests([get_table("orders")], project=tmp_path)  # migrated once: nothing to say
    assert (marts / "orders.yml").read_text() == new + theirs and caplog.text == ""


@pytest.mark.slow
@pytest.mark.integration
def test_a_model_written_before_the_rename_still_merges_and_runs_its_test(
    spark, clean_lakehouse, samples, project_copy: Path
) -> None:
    orders = get_table("orders")
    ingest_export(spark, orders, str(samples["orders"]))
    path = project_copy / "models" / "marts" / "orders.yml"
    migrated = with_old_key_test(path)
    assert cli.main(["merge", "--table", "orders"]) == 0
    assert path.read_text() == migrated
    results = json.loads((project_copy / "target" / "run_results.json").read_text())["results"]
    ran = [r["unique_id"] for r in results if r["status"] == "pass"]
    assert any(".dynamodb_unique_combination_of_columns_orders_" in node for node in ran), ran
    assert spark.table("lake.lakehouse.orders").count() > 0
