from __future__ import annotations

import pytest

from ingestion.naming import column_name, quote, quote_table


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
