"""`register-glue`: Glue tables for Iceberg tables written elsewhere. Glue is moto's server on
127.0.0.1 (a test double for AWS only); the Iceberg tables are made by pyiceberg in a scratch SQL
catalog, so this needs no Spark (tests/maintenance/test_maintenance.py registers a Spark-built
one)."""

from __future__ import annotations

from pathlib import Path

import boto3
import local_s3
import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from ingestion.aws import glue


def test_register_then_move_the_metadata_location(tmp_path: Path) -> None:
    local = SqlCatalog(
        "scratch", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/w"
    )
    local.create_namespace("lakehouse")
    table = local.create_table("lakehouse.books", schema=pa.schema([("id", pa.string())]))
    first = table.metadata_location
    with local_s3.server() as endpoint:
        client = boto3.client("glue", endpoint_url=endpoint, region_name="eu-west-1")
        client.create_database(DatabaseInput={"Name": "lakehouse"})
        catalog = glue.glue_catalog(endpoint, "eu-west-1")
        created = glue.register(catalog, "lakehouse", "books", first)
        assert created.created
        table.append(pa.table({"id": ["a", "b"]}))
        moved = glue.register(catalog, "lakehouse", "books", table.metadata_location)
        assert not moved.created and table.metadata_location != first
        found = client.get_table(DatabaseName="lakehouse", Name="books")["Table"]
        assert found["Parameters"]["table_type"].upper() == "ICEBERG"
        assert found["Parameters"]["metadata_location"] == table.metadata_location
        assert found["Parameters"]["previous_metadata_location"] == first
        assert [c["Name"] for c in found["StorageDescriptor"]["Columns"]] == ["id"]
        assert catalog.load_table("lakehouse.books").scan().to_arrow().num_rows == 2

        client.create_table(
            DatabaseName="lakehouse", TableInput={"Name": "orders", "Parameters": {}}
        )
        with pytest.raises(glue.GlueError, match="not an Iceberg table"):
            glue.register(catalog, "lakehouse", "orders", first)


def test_deregister_deletes_the_entry_only_once(tmp_path: Path) -> None:
    """`remove-table --glue-database`: the Glue entry goes, the files stay."""
    from ingestion.dynamodb.tables import get_table

    local = SqlCatalog(
        "scratch", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/w"
    )
    local.create_namespace("lakehouse")
    table = local.create_table("lakehouse.books", schema=pa.schema([("id", pa.string())]))
    with local_s3.server() as endpoint:
        client = boto3.client("glue", endpoint_url=endpoint, region_name="eu-west-1")
        client.create_database(DatabaseInput={"Name": "lakehouse"})
        with pytest.MonkeyPatch.context() as env:
            env.setenv("AWS_REGION", "eu-west-1")
            glue.register(
                glue.glue_catalog(endpoint), "lakehouse", "books", table.metadata_location
            )
            assert glue.deregister(get_table("books"), "lakehouse", endpoint)
            assert not glue.deregister(get_table("books"), "lakehouse", endpoint)
    assert Path(table.metadata_location.removeprefix("file://")).is_file()
