"""An independent reader of the final tables: DuckDB's iceberg_scan, no Spark, no JVM.

It finds a table's current metadata file in the embedded catalog (Iceberg's JDBC catalog on
SQLite: table ``iceberg_tables``) and reads it with DuckDB's Iceberg extension, loaded offline
from its PyPI wheel.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import duckdb_extension_avro
import duckdb_extension_iceberg


def _extension(module, name: str) -> str:
    found = sorted(Path(module.__file__).parent.glob(f"extensions/*/{name}.duckdb_extension"))
    assert found, f"no {name} extension in {module.__file__}"
    return str(found[-1])


def connect() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(config={"autoinstall_known_extensions": "false"})
    con.execute(f"LOAD '{_extension(duckdb_extension_avro, 'avro')}'")
    con.execute(f"LOAD '{_extension(duckdb_extension_iceberg, 'iceberg')}'")
    return con


def metadata_location(home: Path, namespace: str, table: str) -> str:
    with sqlite3.connect(f"file:{home / 'catalog.db'}?mode=ro", uri=True, timeout=30) as db:
        row = db.execute(
            "select metadata_location from iceberg_tables "
            "where table_namespace = ? and table_name = ?",
            (namespace, table),
        ).fetchone()
    assert row, f"{namespace}.{table} is not in the catalog"
    location = str(row[0])
    return location.removeprefix("file:")


def read_rows(
    con: duckdb.DuckDBPyConnection, home: Path, table: str, columns: str = "*"
) -> list[tuple]:
    location = metadata_location(home, "lakehouse", table)
    return con.execute(f"select {columns} from iceberg_scan('{location}')").fetchall()


@dataclass
class Loop:
    reads: int = 0  # reads that returned the expected row count
    failures: list[str] = field(default_factory=list)  # every other read, with its error


@contextmanager
def reading(home: Path, table: str, rows: int) -> Iterator[Loop]:
    """A DuckDB reader counting the final table's rows in a loop while the block runs: each read
    resolves the current metadata file afresh, as a new Athena query would."""
    loop = Loop()
    stop = threading.Event()

    def run() -> None:
        con = connect()
        while not stop.is_set():
            try:
                got = read_rows(con, home, table, "count(*)")[0][0]
                assert got == rows, f"{got} rows, expected {rows}"
                loop.reads += 1
            except Exception as exc:  # every failed read is recorded for the caller to judge
                loop.failures.append(str(exc)[:300])

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    try:
        yield loop
    finally:
        stop.set()
        reader.join(timeout=60)
