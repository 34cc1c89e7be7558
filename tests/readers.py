"""An independent reader of the final tables: DuckDB's iceberg_scan, no Spark, no JVM.

It finds a table's current metadata file in the embedded catalog (Iceberg's JDBC catalog on
SQLite: table ``iceberg_tables``) and reads it with DuckDB's Iceberg extension, loaded offline
from its PyPI wheel.
"""

from __future__ import annotations

import sqlite3
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
