"""Register final tables written elsewhere (the embedded catalog, another metastore) in AWS Glue,
so Athena finds them: ``table_type=ICEBERG`` and ``metadata_location`` point at the table's current
metadata file. On EMR with the ``emr`` target the Glue catalog is native and this is not needed.

A table already in Glue is updated in place (its ``metadata_location`` moves on and the old one is
kept as ``previous_metadata_location``), never dropped and re-created, so Athena never sees it
missing. The Glue table input is built by pyiceberg's Glue catalog (pinned version), the same code
pyiceberg uses for its own commits.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ingestion.config import names
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb.entities import final_tables
from ingestion.dynamodb.tables import TableConfig

log = logging.getLogger(__name__)


class GlueError(LakehouseError):
    """A table could not be registered in Glue."""


@dataclass(frozen=True)
class Registration:
    table: str
    metadata_location: str
    created: bool  # False: an existing Glue table was updated


def glue_catalog(endpoint: str | None = None, region: str | None = None) -> Any:
    from pyiceberg.catalog.glue import GlueCatalog

    properties = {
        "glue.endpoint": endpoint or os.environ.get("AWS_ENDPOINT_URL_GLUE"),
        "glue.region": region
        or os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION"),
    }
    return GlueCatalog("glue", **{k: v for k, v in properties.items() if v})


def register(catalog: Any, database: str, table: str, metadata_location: str) -> Registration:
    """Create the Glue table pointing at ``metadata_location``, or move an existing one to it."""
    from pyiceberg.catalog.glue import _construct_table_input
    from pyiceberg.serializers import FromInputFile

    io = catalog._load_file_io(location=metadata_location)
    metadata = FromInputFile.table_metadata(io.new_input(metadata_location))
    glue = catalog.glue
    try:
        current = glue.get_table(DatabaseName=database, Name=table)["Table"]
    except glue.exceptions.EntityNotFoundException:
        current = None
    if current is None:
        catalog.register_table((database, table), metadata_location)
        log.info("glue: registered %s.%s at %s", database, table, metadata_location)
        return Registration(f"{database}.{table}", metadata_location, True)
    parameters = current.get("Parameters") or {}
    if parameters.get("table_type", "").upper() != "ICEBERG":
        raise GlueError(f"glue table {database}.{table} exists and is not an Iceberg table")
    previous = parameters.get("metadata_location")
    table_input = _construct_table_input(table, metadata_location, {}, metadata, current, previous)
    version = {"VersionId": current["VersionId"]} if current.get("VersionId") else {}
    glue.update_table(DatabaseName=database, TableInput=table_input, **version)
    log.info("glue: %s.%s moved from %s to %s", database, table, previous, metadata_location)
    return Registration(f"{database}.{table}", metadata_location, False)


def current_metadata_location(spark: Any, namespace: str, table: str) -> str:
    """The table's current metadata file, from Iceberg's metadata tables (any catalog)."""

    row = spark.sql(
        f"select file from "
        f"{names.quote_table(names.CATALOG, namespace, table)}.metadata_log_entries "
        "order by timestamp desc limit 1"
    ).first()
    if row is None:
        raise GlueError(f"{namespace}.{table} has no metadata file")
    location = str(row[0])
    if location.startswith("file:") and not location.startswith("file://"):
        location = "file://" + location[len("file:") :]
    return location


def register_tables(
    tables: list[TableConfig], database: str, endpoint: str | None, report: Callable[[str], Any]
) -> list[Registration]:
    """Every final table of ``tables`` registered (or moved) in Glue's ``database``; a table with
    no final table yet is reported and skipped."""
    from ingestion.spark import spark_config

    spark = spark_config.build_spark("register-glue")
    catalog = glue_catalog(endpoint)
    done = []
    published = [final for entry in tables for final in final_tables(entry)]  # per entity
    # and each one's history (docs/history.md), Athena's as-of queries read it
    published += [
        f.model_copy(update={"name": names.history_table(f.name)}) for f in published if f.history
    ]
    for table in published:
        if not spark.catalog.tableExists(names.final_table(table.name)):
            report(f"{table.name}: no final table yet, skipped")
            continue
        location = current_metadata_location(spark, names.FINAL, table.name)
        done.append(register(catalog, database, table.name, location))
    return done


def deregister(table: TableConfig, database: str, endpoint: str | None = None) -> bool:
    """Delete the final table's registration in Glue's ``database`` (the entry only: its files
    belong to the lakehouse, which drops them); False when it was not registered there."""
    glue = glue_catalog(endpoint).glue
    try:
        current = glue.get_table(DatabaseName=database, Name=table.name)["Table"]
    except glue.exceptions.EntityNotFoundException:
        return False
    if (current.get("Parameters") or {}).get("table_type", "").upper() != "ICEBERG":
        raise GlueError(f"glue table {database}.{table.name} is not an Iceberg table: left alone")
    glue.delete_table(DatabaseName=database, Name=table.name)
    log.info("glue: deleted %s.%s", database, table.name)
    return True
