"""A single-table design's root items: under a key rule a key with no `#` is its own entity value
(`sk = PROFILE` is entity `PROFILE`), where it went to `<table>__unmatched` before (the audit: a
new user's 330 profile items all unmatched, their profile table empty). A change log staged that
way moves them at the next merge; a merge with nothing new answers without a JVM. Through the
CLI; each final table read by DuckDB, the expected items computed in plain Python."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import readers
from items_back import final_items
from support import ROOT

from ingestion.cli import main
from ingestion.dynamodb import entities
from ingestion.samples import sample_exports, single_table
from ingestion.schema import typed_rows

pytestmark = [pytest.mark.slow, pytest.mark.integration]

FINALS = {"USER": "app__user", "ORDER": "app__order", "PROFILE": "app__profile"}


def add_app() -> None:
    args = [
        "add-table",
        "app",
        "--partition-key",
        "pk:S",
        "--sort-key",
        "sk:S",
        "--entity-key",
        "sk",
    ]
    for value in FINALS:
        args += ["--entity", value]
    assert main(args) == 0


def app_items() -> list[dict[str, Any]]:
    """The sample's users, orders, addresses and sessions, a profile (root item, `sk = PROFILE`)
    of every user, and one `sk = METADATA` item of no listed value."""
    items = single_table.items(6, seed=5)
    users = sorted({i["pk"]["S"] for i in items})
    items += [{"pk": {"S": u}, "sk": {"S": "PROFILE"}, "bio": {"S": f"bio of {u}"}} for u in users]
    return [*items, {"pk": {"S": "APP"}, "sk": {"S": "METADATA"}, "version": {"N": "3"}}]


def expected(items: list[dict[str, Any]]) -> dict[str, set[tuple[str, str]]]:
    found: dict[str, set[tuple[str, str]]] = {
        f: set() for f in [*FINALS.values(), "app__unmatched"]
    }
    for item in items:
        value = item["sk"]["S"].split("#", 1)[0]
        found[FINALS.get(value, "app__unmatched")].add((item["pk"]["S"], item["sk"]["S"]))
    return found


def held(home: Path) -> dict[str, set[tuple[str, str]]]:
    con = readers.connect()
    return {
        final: {(r[0], r[1]) for r in readers.read_rows(con, home, final, "pk, sk")}
        for final in [*FINALS.values(), "app__unmatched"]
    }


def no_jvm(*args: str) -> subprocess.CompletedProcess[str]:
    from test_without_spark import (
        no_java,  # tests/catalog: the environment in which no JVM can start
    )

    return subprocess.run(
        [sys.executable, "-m", "ingestion.cli", *args],
        cwd=ROOT,
        env=no_java(),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def no_jvm_helpers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "catalog"))


def test_a_root_item_is_its_own_entity_and_a_no_op_sync_needs_no_jvm(
    spark, clean_lakehouse, project_copy: Path, lakehouse_home: Path, tmp_path: Path, no_jvm_helpers
) -> None:
    add_app()
    items = app_items()
    full = sample_exports.write_items_export(tmp_path / "full", "app", items)
    assert main(["sync", "--table", "app", str(full)]) == 0
    want = expected(items)
    assert len(want["app__profile"]) == 6 and want["app__unmatched"]  # sessions, METADATA
    assert held(lakehouse_home) == want
    spark.sql("refresh table lake.lakehouse.app__profile")
    bios = {r["pk"]: r["bio"] for r in spark.table("lake.lakehouse.app__profile").collect()}
    assert bios == {pk: f"bio of {pk}" for pk, _ in want["app__profile"]}

    # `status`: the one change log's ledger once (it printed it once per entity table), then
    # each entity table's own lines.
    done = no_jvm("status", "--table", "app")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("source(s) in the ledger") == 1
    assert "app: 1 source(s) in the ledger (one change log for its 4 entity tables)" in done.stdout
    for final in [*FINALS.values(), "app__unmatched"]:
        assert f"\n{final}:\n  last applied time:" in done.stdout

    # Nothing new (the export again): `sync` and `merge` answer without a JVM.
    for command in (["sync", "--table", "app", str(full)], ["merge", "--table", "app"]):
        done = no_jvm(*command)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "app: nothing new to merge" in done.stdout


def staged_as_before(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """`app` synced by the earlier rule: the key's text before a first `#`, none without one
    (the earlier code's expression), and no mark of the new reading on its change log."""
    add_app()
    items = app_items()
    text = "`_attrs`['sk'].S"
    earlier = f"case when instr({text}, '#') > 0 then substring_index({text}, '#', 1) end"
    with monkeypatch.context() as patched:
        patched.setattr(entities, "value_sql", lambda by, attribute: earlier)
        # The earlier code staged through the decode in Spark SQL, which reads that rule (the
        # decoder has today's rule in Java).
        patched.setattr(typed_rows, "typed_rows", typed_rows.typed_rows_sql)
        full = sample_exports.write_items_export(tmp_path / "full", "app", items)
        assert main(["sync", "--table", "app", str(full)]) == 0
    spark.sql(
        "alter table lake.staging.app unset tblproperties ('dynamodb-lakehouse.entity-values')"
    )
    return items


def test_root_items_staged_as_unmatched_move_to_their_entity_at_the_next_merge(
    spark,
    clean_lakehouse,
    project_copy: Path,
    lakehouse_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A change log staged by the earlier rule (the key's text before a first `#`, none without
    one: the earlier code's expression, and no mark of the new reading on the table), then a
    merge by this version: the profiles leave the unmatched table for the profile table."""
    items = staged_as_before(spark, tmp_path, monkeypatch)
    want = expected(items)
    before = held(lakehouse_home)
    assert before["app__profile"] == set() and before["app__unmatched"] >= want["app__profile"]

    capsys.readouterr()
    assert main(["merge", "--table", "app"]) == 0
    out = capsys.readouterr().out
    assert "moved from app__unmatched to their entity table (PROFILE (6))" in out
    assert held(lakehouse_home) == want
    spark.sql("refresh table lake.lakehouse.app__profile")
    profile = spark.table("lake.lakehouse.app__profile").collect()
    assert {r["pk"]: r["bio"] for r in profile} == {
        pk: f"bio of {pk}" for pk, _ in want["app__profile"]
    }
    assert all(
        item["sk"] == {"S": "PROFILE"} for item, _ in final_items(spark, "app", "app__profile")
    )
    # Done once: the change log is marked, no refresh is pending, the next merge is a no-op.
    properties = dict(spark.sql("show tblproperties lake.staging.app").collect())
    assert properties.get("dynamodb-lakehouse.entity-values") == "whole-key"
    assert "dynamodb-lakehouse.entities-moved" not in properties
    assert main(["merge", "--table", "app"]) == 0
    assert "app: nothing new to merge" in capsys.readouterr().out


@pytest.mark.faults  # make test-faults
@pytest.mark.parametrize("fault", ["after-rebuild-commit", "after-merge-commit"])
def test_kill_9_while_root_items_move_then_the_same_command_again(
    spark,
    clean_lakehouse,
    project_copy: Path,
    lakehouse_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
) -> None:
    """Killed after the staging rebuild that moved the rows (the final tables not built again
    yet), or after they were built again but before the move is marked done: the next merge
    builds them (again), every item in its table."""
    items = staged_as_before(spark, tmp_path, monkeypatch)
    env = {**os.environ, "LAKEHOUSE_FAULT": fault}
    killed = subprocess.run(
        [sys.executable, "-m", "ingestion.cli", "merge", "--table", "app"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    spark.sql("refresh table lake.staging.app")
    properties = dict(spark.sql("show tblproperties lake.staging.app").collect())
    assert properties.get("dynamodb-lakehouse.entities-moved") == "true"  # the refresh is owed
    assert main(["merge", "--table", "app"]) == 0
    assert held(lakehouse_home) == expected(items)
