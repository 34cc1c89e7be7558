"""The embedded catalog: Iceberg's JDBC catalog on a SQLite file.

Iceberg is told not to create its catalog tables (``jdbc.init-catalog-tables=false``: with it on,
Iceberg 1.10.2 keeps a SQLite read lock for the life of every Spark process and other processes'
commits fail with SQLITE_BUSY). This module creates them once, with the DDL Iceberg uses for its
V1 schema, and switches the file to WAL so that readers never block a writer.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ingestion.config.names import CATALOG, NAMESPACES

_DDL = (
    """create table if not exists iceberg_tables (
        catalog_name varchar(255) not null,
        table_namespace varchar(255) not null,
        table_name varchar(255) not null,
        metadata_location varchar(1000),
        previous_metadata_location varchar(1000),
        iceberg_type varchar(5),
        primary key (catalog_name, table_namespace, table_name)
    )""",
    """create table if not exists iceberg_namespace_properties (
        catalog_name varchar(255) not null,
        namespace varchar(255) not null,
        property_key varchar(255),
        property_value varchar(1000),
        primary key (catalog_name, namespace, property_key)
    )""",
)


def sqlite_path(conf: dict[str, str]) -> Path | None:
    """The SQLite file of the `lake` catalog, or None when the catalog is not a SQLite one."""
    uri = conf.get(f"spark.sql.catalog.{CATALOG}.uri", "")
    prefix = "jdbc:sqlite:"
    if not uri.startswith(prefix):
        return None
    return Path(uri[len(prefix) :].split("?", 1)[0])


def bootstrap(conf: dict[str, str]) -> Path | None:
    """Create the catalog file, its tables and the two namespaces; a no-op when they exist."""
    path = sqlite_path(conf)
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    warehouse = conf.get(f"spark.sql.catalog.{CATALOG}.warehouse", "")
    if warehouse.startswith("file://"):
        Path(warehouse[len("file://") :]).mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path, timeout=60) as db:
        db.execute("pragma journal_mode=wal")
        for ddl in _DDL:
            db.execute(ddl)
        for namespace in NAMESPACES:
            db.execute(
                "insert or ignore into iceberg_namespace_properties "
                "(catalog_name, namespace, property_key, property_value) values (?, ?, 'exists', "
                "'true')",
                (CATALOG, namespace),
            )
    return path
