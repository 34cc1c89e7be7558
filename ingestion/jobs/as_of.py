"""``query --as-of``: the final tables a query names, read as their state at an instant from their
histories (``history: true``, docs/history.md).

Each ``lakehouse.<table>`` the SQL names stands for the rows of ``lakehouse.<table>__history``
valid at the instant (``_valid_from <= t < _valid_to``, or still current), less the deletes (a kept
TTL expiry stays, as in the final table): the history's columns without ``_valid_from`` and
``_valid_to``. A named table without a history is refused, naming the entry key that keeps one. A
history named directly is left as it is."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from ingestion.config import names
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb.entities import final_tables
from ingestion.dynamodb.tables import load_tables
from ingestion.schema.types import HISTORY_COLUMNS, VALID_FROM, VALID_TO


class AsOfError(LakehouseError):
    """An instant that cannot be read, or a table named as of an instant without a history."""


def _named() -> re.Pattern[str]:
    """``<final database>.<t>`` (``lakehouse`` by default), optionally in the catalog and quoted
    with backquotes or double quotes (DuckDB): the names the docs give. A name inside a string
    literal is matched too: give the query no such literal."""
    catalog, final = re.escape(names.CATALOG), re.escape(names.FINAL)
    q = r'[`"]?'
    return re.compile(
        rf'(?<![\w.`"])(?:{q}{catalog}{q}\.)?{q}{final}{q}\.{q}(\w+){q}(?![\w`"])', re.IGNORECASE
    )


def instant(text: str) -> datetime:
    """An ISO 8601 instant (``2026-01-01T00:00:00Z``, an offset, or none: UTC) in UTC, naive."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise AsOfError(
            f"--as-of {text!r} is no instant: give ISO 8601, e.g. 2026-01-01T00:00:00Z"
        ) from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment


def named_tables(sql: str) -> list[str]:
    """The final tables ``sql`` names (``lakehouse.<t>``), histories left out, in order."""
    found = [m.group(1) for m in _named().finditer(sql)]
    tables = list(dict.fromkeys(t for t in found if not t.endswith(names.history_table(""))))
    if not tables:
        raise AsOfError(
            f"--as-of reads {names.FINAL}.<table> as of an instant, and the query names none"
        )
    return tables


def _delete_operations(table: str) -> tuple[str, ...]:
    """The operations that leave no row in ``table``'s final table (its entry's ``ttl_deletes``)."""
    for entry in load_tables().values():
        for final in final_tables(entry):
            if final.name == table and entry.ttl_deletes == "keep":
                return ("delete",)
    return ("delete", "ttl_delete")


def state_sql(table: str, at: str, history: str, columns: list[str]) -> str:
    """The rows of ``history`` valid at the instant ``at`` (a literal), names as the engine
    quotes them."""
    kept = ", ".join(columns)
    deletes = ", ".join(f"'{op}'" for op in _delete_operations(table))
    return (
        f"select {kept} from {history} where {VALID_FROM} <= {at} "
        f"and ({VALID_TO} is null or {VALID_TO} > {at}) and _operation not in ({deletes})"
    )


def spark_sql(spark: Any, sql: str, moment: datetime) -> str:
    """``sql`` with each named final table read as of ``moment``: a temporary view per table,
    named as the table, from its history; the SQL names the views."""
    tables = named_tables(sql)
    for table in tables:
        history = names.final_table(names.history_table(table))
        if not spark.catalog.tableExists(history):
            raise _no_history(table)
        columns = [c for c in spark.table(history).columns if c not in HISTORY_COLUMNS]
        at = f"timestamp '{moment.isoformat(sep=' ')}'"  # the session's zone is UTC (profiles.yml)
        state = state_sql(table, at, history, [f"`{c}`" for c in columns])
        spark.sql(f"create or replace temporary view `{table}` as {state}")
    return _named().sub(
        lambda m: m.group(0) if m.group(1) not in tables else f"`{m.group(1)}`", sql
    )


def duckdb_views(con: Any, sql: str, moment: datetime) -> None:
    """DuckDB's views ``lakehouse.<t>`` of each named table replaced by its state as of
    ``moment``."""
    present = {
        row[0]
        for row in con.execute(
            "select table_name from information_schema.tables where table_schema = ?", [names.FINAL]
        ).fetchall()
    }
    for table in named_tables(sql):
        history = names.history_table(table)
        if history not in present:
            raise _no_history(table)
        columns = [
            row[0]
            for row in con.execute(
                "select column_name from information_schema.columns where table_schema = ? "
                "and table_name = ? order by ordinal_position",
                [names.FINAL, history],
            ).fetchall()
            if row[0] not in HISTORY_COLUMNS
        ]
        at = f"TIMESTAMPTZ '{moment.isoformat(sep=' ')}+00'"
        quoted = [f'"{c}"' for c in columns]
        state = state_sql(table, at, f'"{names.FINAL}"."{history}"', quoted)
        con.execute(f'CREATE OR REPLACE VIEW "{names.FINAL}"."{table}" AS {state}')


def _no_history(table: str) -> AsOfError:
    return AsOfError(
        f"lakehouse.{table} has no history to read as of an instant: set `history: true` in its "
        "entry (docs/history.md); its history starts at its next merge"
    )
