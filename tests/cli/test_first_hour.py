"""A new user's first hour, through the CLI: any DynamoDB table name, the right table's exports,
a table removed or reset, export folders that move, errors that say what to pass, quiet output,
help on every option, the Lambda writer run on a saved event. Glue is moto's server on
127.0.0.1 (a test double for AWS only)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import local_s3
import pytest
import yaml
from items_back import final_items
from support import ROOT

from ingestion.catalog import merge_log
from ingestion.cli import main
from ingestion.cli.app import parser
from ingestion.config import names
from ingestion.samples import sample_exports
from ingestion.samples import stream as sample_stream
from ingestion.samples.items import BASE_TIME
from ingestion.sources.change_file_writer import write_batch

pytestmark = [pytest.mark.slow, pytest.mark.integration]

LATER = int(BASE_TIME.timestamp()) + 600


def s(value: str) -> dict[str, str]:
    return {"S": value}


def final_rows(spark, table: str) -> dict[str, dict[str, Any]]:
    return {
        json.dumps(item, sort_keys=True): {**r.asDict(), "_item": item}
        for item, r in final_items(spark, table)
    }


def configured(project: Path) -> dict[str, Any]:
    raw = yaml.safe_load((project / "dbt_project.yml").read_text())
    return raw["vars"]["dynamodb_tables"]


def test_any_dynamodb_table_name_onboards_end_to_end(
    spark, clean_lakehouse, project_copy: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    assert main(["add-table", "App.Users", "--partition-key", "pk:S", "--sort-key", "sk:S"]) == 0
    out = capsys.readouterr().out
    assert "DynamoDB table App.Users -> lakehouse table lakehouse.app_users" in out
    assert main(["add-table", "orders-prod", "--partition-key", "id:S"]) == 0
    assert configured(project_copy)["app_users"]["dynamodb_table"] == "App.Users"
    assert configured(project_copy)["orders_prod"]["dynamodb_table"] == "orders-prod"
    capsys.readouterr()
    assert main(["add-table", "orders.prod", "--partition-key", "id:S"]) == 2  # one lakehouse name
    refused = capsys.readouterr().err
    assert "'orders-prod' and 'orders.prod' both map to lakehouse table 'orders_prod'" in refused
    assert (
        main(["add-table", "orders.prod", "--name", "orders_prod_2", "--partition-key", "id:S"])
        == 0
    )

    cases = {
        "App.Users": ("app_users", {"pk": s("USER#1"), "sk": s("PROFILE")}),
        "orders-prod": ("orders_prod", {"id": s("7")}),
    }
    location = tmp_path / "streams"
    for dynamodb, (lakehouse, keys) in cases.items():
        item = {**keys, "note": s("first")}
        full = sample_exports.write_items_export(tmp_path / lakehouse, dynamodb, [item])
        assert main(["sync", "--table", dynamodb, str(full)]) == 0  # by its DynamoDB name
        changed = {**item, "note": s("changed")}
        record = sample_stream.stream_record(dynamodb, "MODIFY", keys, item, changed, LATER, 1)
        written, failed = write_batch([record], str(location))
        assert failed is None and written[0].uri.startswith(str(location / dynamodb))
        assert main(["sync", "--table", lakehouse, "--stream", str(location), "--settle", "0"]) == 0
        rows = list(final_rows(spark, lakehouse).values())
        assert [r["_item"]["note"] for r in rows] == [{"S": "changed"}]

    for key, value in local_s3.CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    with local_s3.server() as endpoint:
        glue = boto3.client("glue", endpoint_url=endpoint, region_name="eu-west-1")
        glue.create_database(DatabaseInput={"Name": "lakehouse"})
        assert main(["register-glue", "--table", "app_users", "--glue-endpoint", endpoint]) == 0
        found = glue.get_table(DatabaseName="lakehouse", Name="app_users")["Table"]
        assert found["Parameters"]["table_type"].upper() == "ICEBERG"


def test_another_tables_export_is_refused_and_a_table_can_be_removed_and_added_again(
    spark, clean_lakehouse, project_copy: Path, tmp_path: Path, capsys
) -> None:
    assert main(["add-table", "app", "--partition-key", "pk:S"]) == 0
    item = {"pk": s("1"), "v": s("x")}
    other = sample_exports.write_items_export(tmp_path / "dev", "app-dev", [item])
    capsys.readouterr()
    assert main(["sync", "--table", "app", str(other)]) == 2
    err = capsys.readouterr().err
    assert "table/app-dev" in err and "table app is DynamoDB table/app" in err
    assert "nothing staged" in err
    assert not spark.catalog.tableExists("lake.staging.app")

    own = sample_exports.write_items_export(tmp_path / "own", "app", [item])
    assert main(["sync", "--table", "app", str(own)]) == 0
    assert spark.catalog.tableExists("lake.lakehouse.app")
    assert main(["verify", "--table", "app", str(own)]) == 0

    # --reset: the data goes, the configuration stays.
    assert main(["remove-table", "app", "--reset"]) == 1  # without --yes nothing is deleted
    assert spark.catalog.tableExists("lake.staging.app")
    assert main(["remove-table", "app", "--reset", "--yes"]) == 0
    for name in ("lake.staging.app", "lake.lakehouse.app"):
        spark.sql(f"refresh table {name}") if spark.catalog.tableExists(name) else None
        assert not spark.catalog.tableExists(name)
    assert "app" in configured(project_copy)
    verifies = spark.table(names.verify_log_table())
    assert verifies.where("table_name = 'app'").count() == 0  # no verify of data now gone
    assert main(["sync", "--table", "app", str(own)]) == 0  # starts again from the full export

    # Removed: everything it owns, then added again from scratch.
    model = project_copy / "models/marts/app.sql"
    assert model.exists()
    capsys.readouterr()
    assert main(["remove-table", "app"]) == 1
    assert "models/marts/app.sql" in capsys.readouterr().out and model.exists()
    assert main(["remove-table", "app", "--yes"]) == 0
    assert "app" not in configured(project_copy) and not model.exists()
    sources = (project_copy / "models/staging/dynamodb/__sources.yml").read_text()
    assert "name: app\n" not in sources
    assert not spark.catalog.tableExists("lake.staging.app")
    assert not spark.catalog.tableExists("lake.lakehouse.app")
    assert "app" not in {
        r[0] for r in spark.table(names.merge_log_table()).select("table_name").collect()
    }
    assert merge_log.merged_batches(spark, "app") == set()
    assert main(["add-table", "app", "--partition-key", "pk:S"]) == 0
    assert main(["sync", "--table", "app", str(own)]) == 0
    assert len(final_rows(spark, "app")) == 1


def test_export_folders_that_moved_are_read_where_they_are(
    spark, clean_lakehouse, tmp_path: Path, capsys
) -> None:
    items = [{"id": s("a"), "title": s("A")}]
    full = sample_exports.write_items_export(tmp_path / "orig", "books", items)
    copied = tmp_path / "myexport"
    shutil.copytree(full, copied)  # cp -r .../AWSDynamoDB/<id> ./myexport
    lines = [
        {
            "Metadata": {"WriteTimestampMicros": {"N": str(LATER * 1_000_000)}},
            "Keys": {"id": s("b")},
            "NewImage": {"id": s("b"), "title": s("B")},
        }
    ]
    window = (BASE_TIME, BASE_TIME + timedelta(hours=1))
    incremental = sample_exports.write_incremental_export(tmp_path / "inc", "books", lines, window)
    moved = tmp_path / "elsewhere" / "AWSDynamoDB"
    shutil.copytree(incremental.parent, moved)  # the export folder and the shared data/ beside it

    missing = next((moved / "data").iterdir())
    saved = missing.read_bytes()
    missing.unlink()
    assert main(["ingest", "--table", "books", str(moved / incremental.name)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "AWSDynamoDB/data/ folder beside its export folder" in err
    missing.write_bytes(saved)

    assert main(["ingest", "--table", "books", str(copied), str(moved / incremental.name)]) == 0
    spark.sql("refresh table lake.staging.books")
    assert spark.table("lake.staging.books").count() == 2


def test_errors_say_what_to_pass(tmp_path: Path, capsys) -> None:
    full = sample_exports.write_items_export(tmp_path, "books", [{"id": s("a")}])
    parent = full.parent  # .../AWSDynamoDB
    assert main(["ingest", "--table", "books", str(parent)]) == 2
    assert (
        "holds 1 export folder(s), not an export: give the ones to stage" in capsys.readouterr().err
    )
    assert main(["ingest", "--table", "books", str(tmp_path / "nope")]) == 2
    assert "does not exist: give an export folder" in capsys.readouterr().err
    assert main(["ingest", "--table", "books", str(full / "manifest-summary.json")]) == 2
    assert f"give the export folder that holds it ({full})" in capsys.readouterr().err


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ingestion.cli", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_a_failing_batch_ends_in_one_line_without_a_java_stack_trace(
    clean_lakehouse, tmp_path: Path
) -> None:
    items = [{"id": s("a")}, {"ident": s("b")}]  # a key attribute missing: the batch fails
    export = sample_exports.write_items_export(tmp_path, "books", items, seed=99)
    done = cli("ingest", "--table", "books", str(export))
    assert done.returncode == 2, done.stderr[-2000:]
    assert "\tat " not in done.stderr and "Exception in task" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: ")


def test_out_of_memory_is_one_line_saying_what_to_do(lakehouse_home: Path) -> None:
    """A job that runs out of the driver's memory, or a driver memory Spark refuses: one line
    naming the command and what to do (exit 2), no Python traceback, no Java stack."""
    big = "select size(collect_list(repeat(cast(id as string), 100000))) as n from range(30000)"
    done = cli("query", big, env={"LAKEHOUSE_DRIVER_MEMORY": "520m"})
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: query ") and "out of the driver's memory" in last, done.stderr[
        -3000:
    ]
    assert "driver memory 520m" in last and "LAKEHOUSE_DRIVER_MEMORY=4g" in last
    assert "Traceback" not in done.stderr and "\tat " not in done.stderr, done.stderr[-3000:]
    done = cli("query", "select 1", env={"LAKEHOUSE_DRIVER_MEMORY": "300m"})  # refused before Spark
    assert done.returncode == 2 and "Traceback" not in done.stderr and "\tat " not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: driver memory 300m (LAKEHOUSE_DRIVER_MEMORY) is below the 512m Spark needs to "
        "start: give at least 1g (the default is 2g)"
    ]


def test_the_first_hours_messages_say_what_to_do(
    spark, clean_lakehouse, project_copy: Path, capsys
) -> None:
    """A plain `dbt run` before any ingest says to ingest first (not Spark's
    TABLE_OR_VIEW_NOT_FOUND); a mistyped --table names the closest configured table; `add-table
    --history` on a configured table says how to turn its history on."""
    from ingestion.merge import dbt_process

    assert (
        main(
            [
                "add-table",
                "Invoices",
                "--partition-key",
                "tenant_id:S",
                "--sort-key",
                "invoice_id:S",
            ]
        )
        == 0
    )
    capsys.readouterr()
    with pytest.raises(dbt_process.DbtError):
        dbt_process.dbt_invoke(["run", "--select", "invoices"])
    shown = "".join(capsys.readouterr())
    assert (
        "table invoices: nothing is staged yet" in shown
        and "Ingest first: ddb-lakehouse sync --table invoices" in shown
    )
    assert "TABLE_OR_VIEW_NOT_FOUND" not in shown

    assert main(["status", "--table", "invoice"]) == 2
    assert "unknown table 'invoice': did you mean 'invoices'?" in capsys.readouterr().err
    assert main(["status", "--table", "Invoice"]) == 2  # its DynamoDB name, mistyped
    assert "did you mean 'invoices'?" in capsys.readouterr().err

    assert (
        main(
            [
                "add-table",
                "Invoices",
                "--partition-key",
                "tenant_id:S",
                "--sort-key",
                "invoice_id:S",
                "--history",
            ]
        )
        == 2
    )
    refused = capsys.readouterr().err
    assert "add `history: true` to its entry (vars.dynamodb_tables.invoices)" in refused


def test_output_is_quiet_and_plain_by_default(
    spark, clean_lakehouse, tmp_path: Path, capsys, monkeypatch
) -> None:
    export = sample_exports.write_items_export(tmp_path, "books", [{"id": s("a")}])
    assert main(["sync", "--table", "books", str(export)]) == 0
    out = capsys.readouterr().out
    assert "Running with dbt" not in out and "\x1b[" not in out  # dbt's log is in its file
    log_line = next(line for line in out.splitlines() if line.startswith("dbt's log: "))
    assert Path(log_line.removeprefix("dbt's log: ")).is_file()
    assert len(out.splitlines()) <= 20, out

    monkeypatch.setenv("LAKEHOUSE_VERBOSE", "1")  # -v
    later = sample_exports.write_items_export(
        tmp_path / "2", "books", [{"id": s("b")}], BASE_TIME + timedelta(hours=1), 1
    )
    assert main(["-v", "sync", "--table", "books", str(later)]) == 0
    out = capsys.readouterr().out
    assert "Running with dbt" in out and "\x1b[" not in out  # on screen, no colour in a pipe


def walk(command: argparse.ArgumentParser, path: list[str]):
    for action in command._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, [*path, name])
        elif not isinstance(action, argparse._HelpAction):
            yield " ".join(path), action


def test_every_option_of_every_command_has_help() -> None:
    undescribed = [
        f"{command}: {'/'.join(action.option_strings) or action.dest}"
        for command, action in walk(parser(), [])
        if not (action.help or "").strip()
    ]
    assert undescribed == []
    add_table = parser().parse_args(["add-table", "x", "--partition-key", "id:S"])
    assert add_table.command == "add-table"


def test_the_lambda_writer_runs_locally_on_a_saved_event(tmp_path: Path) -> None:
    records = [
        sample_stream.stream_record("books", "INSERT", {"id": s(k)}, None, {"id": s(k)}, t, n)
        for n, (k, t) in enumerate((("a", LATER), ("b", LATER + 90)), 1)
    ]
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"Records": records}))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ingestion.sources.change_file_writer",
            str(event),
            str(tmp_path / "out"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (written,) = (tmp_path / "out" / "books").iterdir()
    # The name says the time range its changes span: earliest and latest.
    assert written.name.startswith("20260114T102850Z-20260114T103020Z-"), written.name
    assert "wrote 2 change(s)" in done.stdout


def test_the_databases_take_the_names_the_account_has_free(tmp_path: Path) -> None:
    """An AWS account may already have a `staging` or a `lakehouse` Glue database: both names
    come from variables, and every step (staging, dbt's merge, the summary) uses them."""
    import sqlite3

    home = tmp_path / "home"
    env = {
        "LAKEHOUSE_HOME": str(home),
        names.STAGING_VARIABLE: "ddb_changes",
        names.FINAL_VARIABLE: "ddb_tables",
    }
    export = sample_exports.write_items_export(tmp_path, "books", [{"id": s("a")}, {"id": s("b")}])
    done = cli("sync", "--table", "books", str(export), env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ddb_tables.books" in done.stdout, done.stdout
    with sqlite3.connect(home / "catalog.db") as catalog:
        tables = set(catalog.execute("select table_namespace, table_name from iceberg_tables"))
    assert ("ddb_changes", "books") in tables and ("ddb_tables", "books") in tables, tables
    assert {namespace for namespace, _ in tables} == {"ddb_changes", "ddb_tables"}, tables

    for wrong, message in (
        ({names.FINAL_VARIABLE: "Lake-House"}, "LAKEHOUSE_FINAL_DATABASE='Lake-House' is not"),
        ({names.STAGING_VARIABLE: "same", names.FINAL_VARIABLE: "same"}, "both name 'same'"),
    ):
        refused = cli("status", env={"LAKEHOUSE_HOME": str(home), **wrong})
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr[-2000:]
