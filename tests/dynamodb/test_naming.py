from __future__ import annotations

import pytest

from ingestion.config.names import quote, quote_table
from ingestion.dynamodb.naming import column_name


@pytest.mark.parametrize(
    ("attribute", "column"),
    [
        ("Title", "title"),
        ("first-name", "first_name"),
        ("x.y", "x_y"),
        ("a b", "a_b"),
        ("order", "order"),
        ("a--b  c", "a_b_c"),
        ("2fa", "_2fa"),
        ("ÉtÉ", "_t_"),
        ("already_ok_1", "already_ok_1"),
    ],
)
def test_column_name_rule(attribute: str, column: str) -> None:
    assert column_name(attribute) == column


def test_quote_doubles_backticks() -> None:
    hostile = "x` string); drop table lakehouse.books; --"
    assert quote(hostile) == "`x`` string); drop table lakehouse.books; --`"
    assert quote_table("lake", "staging", "books") == "`lake`.`staging`.`books`"


NAMES = ["Title", "first-name", "x.y", "a b", "order", "2fa", "a--b  c", "ÉtÉ", "Mixed.Case-9"]


@pytest.mark.slow
@pytest.mark.integration
def test_dbt_macro_names_columns_like_python(spark) -> None:
    """macros/keys.sql mirrors ingestion/naming.py: the models find the columns ingestion wrote."""
    from dbt.cli.main import dbtRunner

    from ingestion.config import settings

    project = settings.project_dir()
    expression = " ~ '|' ~ ".join(f"dynamodb_column_name('{name}')" for name in NAMES)
    result = dbtRunner().invoke(
        [
            "compile",
            "--quiet",
            "--inline",
            "{{ " + expression + " }}",
            "--project-dir",
            str(project),
            "--profiles-dir",
            str(project / "profiles"),
        ]
    )
    assert result.success, result.exception
    compiled = result.result.results[0].node.compiled_code
    assert compiled.strip().split("|") == [column_name(name) for name in NAMES]
