"""The example Athena queries in athena/: they parse in sqlglot's Athena dialect, name only
columns the final tables (or their histories) have, and (translated to Spark SQL by sqlglot) run
against real final tables built from the sample exports, `books` with its history."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp
from support import ROOT

from ingestion.config import names
from ingestion.dynamodb.tables import get_table, load_tables
from ingestion.merge import runner
from ingestion.project import scaffold
from ingestion.schema import schema_file, types
from ingestion.staging.exports import ingest_export

QUERIES = sorted((ROOT / "athena").glob("*.sql"))


HISTORY = names.history_table("")  # the suffix of a final table's history
HISTORY_COLUMNS = {"_valid_from", "_valid_to"}  # what a history has beside its table's columns


def final_columns(table: str) -> set[str]:
    """A final table's columns, or its history's (``<table>__history``)."""
    if table.endswith(HISTORY):
        return final_columns(table.removesuffix(HISTORY)) | HISTORY_COLUMNS
    loaded = schema_file.table_schema_file(get_table(table))
    assert loaded is not None
    return {a.column for a in schema_file.from_file(loaded).attributes} | set(
        types.METADATA_COLUMNS
    )


@pytest.mark.parametrize("path", QUERIES, ids=[p.name for p in QUERIES])
def test_query_parses_as_athena_sql_and_names_real_columns(path: Path) -> None:
    tree = sqlglot.parse_one(path.read_text(), read="athena", error_level=sqlglot.ErrorLevel.RAISE)
    tables = {f"{t.db}.{t.name}" for t in tree.find_all(exp.Table) if t.db}
    finals = {f"lakehouse.{name}{end}" for name in load_tables() for end in ("", HISTORY)}
    assert tables and tables <= finals, tables
    known = set().union(*(final_columns(t.split(".")[1]) for t in tables))
    relations = {a.name for a in tree.find_all(exp.TableAlias)}  # b, now_rows, hour_ago, t
    unnested = {c.name for a in tree.find_all(exp.TableAlias) for c in a.columns}  # format, price
    outputs = {a.alias for a in tree.find_all(exp.Alias)}
    for column in tree.find_all(exp.Column):
        parts = [p.name for p in column.parts]
        while parts and parts[0] in relations:
            parts = parts[1:]  # a table or subquery qualifier
        first = parts[0]
        if first in unnested:
            continue  # a field of an unnested struct (checked by running the query below)
        # the first remaining part is a column (the rest, struct fields) or an output alias
        assert first in known or first in outputs, f"{path.name}: {column.sql()}"


def struct_fields(table: str, column: str) -> list[str] | None:
    """The field columns of ``column``'s elements when it is an array of structs, else None."""
    loaded = schema_file.table_schema_file(get_table(table))
    assert loaded is not None
    for attribute in schema_file.from_file(loaded).attributes:
        element = attribute.type.element
        if attribute.column == column and element is not None and element.kind == "struct":
            return [f.column for f in element.fields]
    return None


@pytest.mark.parametrize("path", QUERIES, ids=[p.name for p in QUERIES])
def test_unnest_follows_trinos_rule_for_arrays_of_rows(path: Path) -> None:
    """In Athena (Trino) `unnest` of an array of rows gives one column per field: the alias
    must name every field (`as t (format, price)`), not the row (`as t (e)`, which Athena
    refuses; Spark, where the other test runs the query, accepts both)."""
    tree = sqlglot.parse_one(path.read_text(), read="athena")
    tables = {t.alias_or_name: t.name for t in tree.find_all(exp.Table)}
    for unnest in tree.find_all(exp.Unnest):
        for column in unnest.expressions:
            assert isinstance(column, exp.Column), unnest.sql()
            fields = struct_fields(tables[column.table], column.name)
            alias = unnest.args.get("alias")
            named = [c.name for c in alias.columns] if alias else []
            if fields is not None:
                assert named == fields, f"{path.name}: {unnest.sql()} must name {fields}"


def spark_sql(athena: str) -> str:
    """An Athena query in Spark SQL: sqlglot's translation, with an array of rows unnested into
    one column per field (``inline``, Trino's rule) where the alias names several columns."""
    text = sqlglot.transpile(athena, read="athena", write="spark")[0]
    return re.sub(
        r"LATERAL VIEW EXPLODE\((.+?)\) (\w+) AS (\w+(?:, \w+)+)",
        r"LATERAL VIEW INLINE(\1) \2 AS \3",
        text,
    )


@pytest.mark.slow
def test_queries_run_on_the_final_tables(spark, clean_lakehouse, samples, project_copy) -> None:
    # `books` with its history, as the history's example reads it (written as add-table does).
    config = project_copy / "dbt_project.yml"
    entry = "\n    books:\n"
    assert config.read_text().count(entry) == 1, "dbt_project.yml: no books entry"
    config.write_text(config.read_text().replace(entry, entry + "      history: true\n"))
    assert scaffold.write_missing_history(get_table("books"), project_copy)
    tables = [get_table("books"), get_table("orders")]
    for table in tables:
        ingest_export(spark, table, str(samples[table.name]))
    runner.run_merge(spark, tables, test=False)
    for path in QUERIES:
        text = path.read_text().replace("interval '1' hour", "interval '0' second")
        rows = spark.sql(spark_sql(text)).collect()
        assert rows, f"{path.name} returned no row"
    # The sample's books are from before the example's instant and unchanged since: as of it,
    # the history's items are the final table's.
    as_of_rows = spark.sql(spark_sql((ROOT / "athena" / "as_of.sql").read_text())).collect()
    books = spark.table("lake.lakehouse.books").select("id", "title").collect()
    assert sorted((r["id"], r["title"]) for r in as_of_rows) == sorted(map(tuple, books))
