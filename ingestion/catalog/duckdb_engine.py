"""DuckDB with its Iceberg, Avro and S3 (httpfs) extensions, loaded by path from their PyPI
wheels (nothing is downloaded), to scan an Iceberg table as of its current metadata file,
honouring its position deletes."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ingestion.sources.s3_uri import as_s3

EXTENSIONS = (
    ("duckdb_extension_avro", "avro"),
    ("duckdb_extension_iceberg", "iceberg"),
    ("duckdb_extension_httpfs", "httpfs"),
)


def _extension(module_name: str, name: str) -> str:
    import importlib

    module = importlib.import_module(module_name)
    found = sorted(Path(str(module.__file__)).parent.glob(f"extensions/*/{name}.duckdb_extension"))
    if not found:
        raise RuntimeError(f"no {name} extension in {module.__file__}")
    return str(found[-1])


@functools.cache
def connect() -> Any:
    """The process's DuckDB connection that reads Iceberg tables on this machine or on S3 (the
    endpoint of ``AWS_ENDPOINT_URL_S3`` when set, as the rehearsal's local S3)."""
    import duckdb

    con = duckdb.connect(config={"autoinstall_known_extensions": "false"})
    for module_name, name in EXTENSIONS:
        con.execute(f"LOAD '{_extension(module_name, name)}'")
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3")
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        options = [f"KEY_ID '{key}'", f"SECRET '{secret}'"]
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region:
            options.append(f"REGION '{region}'")
        if endpoint:
            parsed = urlparse(endpoint)
            options += [
                f"ENDPOINT '{parsed.netloc}'",
                "URL_STYLE 'path'",
                f"USE_SSL {'true' if parsed.scheme == 'https' else 'false'}",
            ]
        con.execute(f"CREATE SECRET lakehouse_s3 (TYPE s3, {', '.join(options)})")
    return con


def scan(location: str) -> str:
    """The table expression of an Iceberg table as of the metadata file ``location``."""
    path = as_s3(location.removeprefix("file:")).replace("'", "''")
    return f"iceberg_scan('{path}')"


def query(namespace: str, table: str, sql: str, parameters: list[Any] | None = None) -> list[tuple]:
    """``sql`` with ``{table}`` standing for the table's current state; [] when the catalog does
    not hold the table."""
    from ingestion.catalog import table_metadata

    location = table_metadata.metadata_location(namespace, table)
    if location is None:
        return []
    rows: list[tuple] = (
        connect().execute(sql.format(table=scan(location)), parameters or []).fetchall()
    )
    return rows


def with_views(namespaces: tuple[str, ...]) -> Any:
    """The connection with a schema per namespace and a view per table of the catalog
    (``lakehouse.books`` reads the table's current state): SQL names tables as with Spark."""
    from ingestion.catalog import table_metadata

    con = connect()
    for namespace, table, location in table_metadata.tables(namespaces):
        con.execute(f'CREATE SCHEMA IF NOT EXISTS "{namespace}"')
        con.execute(
            f'CREATE OR REPLACE VIEW "{namespace}"."{table}" AS SELECT * FROM {scan(location)}'
        )
    return con
