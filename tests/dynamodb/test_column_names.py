from __future__ import annotations

import pytest
from dbt_compile import compile_inline

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


NAMES = ["Title", "first-name", "x.y", "a b", "order", "2fa", "a--b  c", "ÉtÉ", "Mixed.Case-9"]


@pytest.mark.slow
@pytest.mark.integration
def test_dbt_macro_names_columns_like_python(spark) -> None:
    """macros/column_name.sql mirrors ingestion/dynamodb/naming.py: the models find the columns
    ingestion wrote."""
    expression = " ~ '|' ~ ".join(f"dynamodb_column_name('{name}')" for name in NAMES)
    compiled = compile_inline("{{ " + expression + " }}")
    assert compiled.split("|") == [column_name(name) for name in NAMES]
