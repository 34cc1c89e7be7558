"""Helpers of the `verify` tests: a table synced from one export, a verify run through the command
line, a key as verify prints it, an export's items, and a DynamoDB client whose answers the test
gives (botocore's Stubber: a test double for the control plane only; every request it receives is
checked against botocore's model of the API)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from ingestion import cli
from ingestion.dynamodb.tables import get_table
from ingestion.merge import runner
from ingestion.sources import manifest
from ingestion.staging.exports import ingest_export

ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/orders"  # the samples' table


def synced(spark: Any, folder: Path, table: str = "orders") -> None:
    ingest_export(spark, get_table(table), str(folder))
    runner.run_merge(spark, [get_table(table)], test=False)


def verified(
    folder: Path | None, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, Any]:
    """``verify --table orders FOLDER --format json`` (or ``extra`` in place of the folder): exit
    code and the JSON report (None when nothing was printed)."""
    given = [str(folder)] if folder else []
    code = cli.main(["verify", "--table", "orders", *given, *extra, "--format", "json"])
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip() else None)


def key(customer: str, order: str) -> str:
    """An ``orders`` key as verify names it."""
    return json.dumps([{"S": customer}, {"S": order}])


def export_items(folder: Path) -> list[dict[str, Any]]:
    """Every item of a full export, in DynamoDB JSON."""
    items = []
    for data_file in manifest.read_export(folder).files:
        with gzip.open(str(data_file.path), "rt") as lines:
            items += [json.loads(line)["Item"] for line in lines if line.strip()]
    return items


def stubbed(service: str = "dynamodb") -> tuple[Any, Stubber]:
    client = boto3.client(
        service, region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    return client, Stubber(client)
