"""dbt's parsed project kept in the process (ingestion/merge/dbt_manifest.py): parsed once while
the files dbt reads, the environment they read and the flags that change a parse stay the same;
parsed again when any of them changes; a command on the kept manifest compiles its nodes afresh
(an ephemeral model's CTE injected every time); a project that no longer parses fails the merge
as `dbt parse`, and merges nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ingestion.catalog import merge_log
from ingestion.cli import main
from ingestion.dynamodb.tables import get_table
from ingestion.merge import dbt_manifest, runner
from ingestion.merge.dbt_process import DbtError
from ingestion.merge.model_tests import ModelTestError
from ingestion.samples import sample_exports
from ingestion.samples import stream as sample_stream
from ingestion.samples.items import BASE_TIME
from ingestion.sources.change_file_writer import write_batch

LATER = int(BASE_TIME.timestamp()) + 3600


def _project(root: Path) -> Path:
    (root / "models" / "marts").mkdir(parents=True)
    (root / "macros").mkdir()
    (root / "tests").mkdir()
    (root / "dbt_project.yml").write_text("name: p\nmodel-paths: [models]\n")
    (root / "models" / "marts" / "m.sql").write_text("select 1 as a\n")
    (root / "macros" / "x.sql").write_text("{% macro x() %}1{% endmacro %}\n")
    (root / "tests" / "test_python.py").write_text("def test(): pass\n")
    return root


def test_the_key_follows_what_dbt_parses_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _project(tmp_path)
    first = dbt_manifest.key(project, [])
    assert dbt_manifest.key(project, []) == first
    # Not read by dbt: a Python file of the tests' folder, a file of target/ or logs/.
    (project / "tests" / "test_python.py").write_text("def test(): assert True\n")
    (project / "target").mkdir()
    (project / "target" / "run_results.json").write_text("{}")
    assert dbt_manifest.key(project, []) == first
    changes = [
        lambda: (project / "models" / "marts" / "m.sql").write_text("select 2 as a\n"),
        lambda: (project / "macros" / "x.sql").write_text("{% macro x() %}2{% endmacro %}\n"),
        lambda: (project / "models" / "marts" / "n.py").write_text("def model(dbt, s): ...\n"),
        lambda: (project / "tests" / "singular.sql").write_text("select 1 where false\n"),
        lambda: (project / "profiles.yml").write_text("p: {}\n"),
        lambda: monkeypatch.setenv("LAKEHOUSE_SOMETHING", "1"),
        lambda: monkeypatch.setenv("DBT_SOMETHING", "1"),
        lambda: (project / ".dbtignore").write_text("models/marts/n.py\n"),
        # A variable a parsed file names in env_var(), whatever its prefix: the file, then its
        # value (profiles.yml reads AWS_ENDPOINT_URL_S3; a user's model may read any).
        lambda: (project / "models" / "marts" / "e.sql").write_text(
            'select \'{{ env_var("REGION_OF_THE_MODEL", "x") }}\' as r\n'
        ),
        lambda: monkeypatch.setenv("REGION_OF_THE_MODEL", "eu-west-1"),
    ]
    seen = {first}
    for change in changes:
        change()
        now = dbt_manifest.key(project, [])
        assert now not in seen, change
        seen.add(now)
    # A variable no parsed file names, nor of the project's prefixes: not part of a parse.
    monkeypatch.setenv("DYNAMODB_LAKEHOUSE_RUN", '{"batches": ["b1"]}')
    monkeypatch.setenv("SOME_OTHER_VARIABLE", "1")
    assert dbt_manifest.key(project, []) == now
    # A dbt_project.yml that is no YAML: every default folder still read (dbt's parse says what
    # is wrong with the file).
    (project / "dbt_project.yml").write_text("name: [p\n")
    broken = dbt_manifest.key(project, [])
    (project / "macros" / "x.sql").write_text("{% macro x() %}3{% endmacro %}\n")
    assert dbt_manifest.key(project, []) != broken
    (project / "dbt_project.yml").write_text("name: p\nmodel-paths: [models]\n")
    # A folder the project names (dbt_project.yml's model-paths) is read, the default is not.
    (project / "dbt_project.yml").write_text("name: p\nmodel-paths: [elsewhere]\n")
    moved = dbt_manifest.key(project, [])
    (project / "models" / "marts" / "m.sql").write_text("select 3 as a\n")
    assert dbt_manifest.key(project, []) == moved
    (project / "elsewhere").mkdir()
    (project / "elsewhere" / "m.sql").write_text("select 1\n")
    assert dbt_manifest.key(project, []) != moved
    # The flags that change a parse, with their values.
    assert dbt_manifest.key(project, ["--vars", "{a: 1}"]) != dbt_manifest.key(project, [])
    assert dbt_manifest.key(project, ["--vars", "{a: 1}"]) != dbt_manifest.key(
        project, ["--vars", "{a: 2}"]
    )


def test_only_the_flags_that_change_a_parse_are_its_flags() -> None:
    args = ["test", "--select", "m+", "--vars", "{a: 1}", "--threads", "4", "--target=emr"]
    assert dbt_manifest.parse_flags(args) == ["--vars", "{a: 1}", "--target=emr"]
    assert dbt_manifest.parse_flags(["run", "--full-refresh", "--select", "m"]) == []


def test_artifacts_go_where_dbt_writes_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    project = _project(tmp_path)
    monkeypatch.delenv("DBT_TARGET_PATH", raising=False)
    assert dbt_manifest.target_path(project) == project / "target"
    (project / "dbt_project.yml").write_text("name: p\ntarget-path: out\n")
    assert dbt_manifest.target_path(project) == project / "out"
    monkeypatch.setenv("DBT_TARGET_PATH", "elsewhere")
    assert dbt_manifest.target_path(project) == project / "elsewhere"
    # The command's own flag first, in either spelling.
    assert dbt_manifest.target_path(project, ["--target-path", "t2"]) == project / "t2"
    assert dbt_manifest.target_path(project, ["--vars", "{}", "--target-path=t3"]) == (
        project / "t3"
    )


def _change(streams: Path, key: str, title: str, moment: int) -> None:
    old = {"id": {"S": key}, "title": {"S": "old"}}
    new = {"id": {"S": key}, "title": {"S": title}}
    record = sample_stream.stream_record("books", "MODIFY", {"id": {"S": key}}, old, new, moment, 1)
    assert write_batch([record], str(streams))[1] is None
    assert main(["ingest", "--table", "books", "--stream", str(streams), "--settle", "0"]) == 0


def _title(spark: Any, key: str) -> str:
    return str(spark.sql(f"select title from lake.lakehouse.books where id = '{key}'").first()[0])


@pytest.mark.slow
@pytest.mark.integration
def test_merges_parse_the_project_once_and_again_when_it_changes(
    spark, clean_lakehouse, project_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parses: list[str] = []
    keep = dbt_manifest.keep
    monkeypatch.setattr(dbt_manifest, "keep", lambda k, m: (parses.append(k), keep(k, m)))
    dbt_manifest.forget()
    full = sample_exports.write_samples(tmp_path / "exports", 30, 7, ["books"])["books"]
    assert main(["sync", "--table", "books", str(full)]) == 0
    assert len(parses) == 1  # one parse for the first build's `dbt run` and `dbt test`
    key = spark.sql("select min(id) from lake.lakehouse.books").first()[0]
    streams = tmp_path / "streams"

    # Two merges more on the kept manifest: each compiles the model afresh, its ephemeral
    # staging model inlined as a CTE again (else Spark finds no such table), and merges.
    for n in range(2):
        _change(streams, key, f"kept {n}", LATER + n)
        assert main(["merge", "--table", "books"]) == 0
        assert _title(spark, key) == f"kept {n}"
    assert len(parses) == 1

    # A changed model file: parsed again, and the change is what runs.
    model = project_copy / "models" / "marts" / "books.sql"
    model.write_text(model.read_text() + "\n-- changed\n")
    _change(streams, key, "changed", LATER + 10)
    assert main(["merge", "--table", "books"]) == 0
    assert len(parses) == 2 and _title(spark, key) == "changed"

    # A model YAML that is no YAML: refused in one line before anything runs (it failed with
    # pyyaml's traceback before); a project that dbt no longer parses: the merge fails as
    # `dbt parse`. Both merge nothing, and the fixed project merges the batch.
    schema = project_copy / "models" / "marts" / "books.yml"
    good_schema, good_model = schema.read_text(), model.read_text()
    _change(streams, key, "after the fix", LATER + 20)
    (batch,) = merge_log.new_batches(spark, "books")
    schema.write_text(good_schema + "\n  - this: [is not\n")
    with pytest.raises(ModelTestError, match=r"books.yml does not parse at line \d+, column"):
        runner.run_merge(spark, [get_table("books")])
    schema.write_text(good_schema)
    model.write_text(good_model + "\n{{ not closed\n")
    with pytest.raises(DbtError, match="`dbt parse` failed"):
        runner.run_merge(spark, [get_table("books")])
    assert merge_log.new_batches(spark, "books") == [batch]
    assert _title(spark, key) == "changed"
    model.write_text(good_model)
    assert main(["merge", "--table", "books"]) == 0
    # The project as it was at the last parse that succeeded: that parse's manifest serves.
    assert _title(spark, key) == "after the fix" and len(parses) == 2
