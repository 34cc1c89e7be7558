"""Exports on s3://: `sync` reads the manifests with boto3 and the data files with Spark (S3A),
and builds the same final table as from the same exports on local paths.

S3 is moto's server on 127.0.0.1 (a test double for AWS only); the exports are the project's
AWS-format samples, uploaded as AWS lays them out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import local_s3
import pytest
from conftest import reset_lakehouse
from items_back import final_items
from support import ROOT

from ingestion.cli import main
from ingestion.samples import orders_chain, sample_exports
from ingestion.sources import manifest
from ingestion.sources.locations import S3Path
from ingestion.spark import jars

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.aws]

BUCKET = "lakehouse-exports"


def upload(s3, folder: Path, prefix: str) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            key = f"{prefix}/{path.relative_to(folder).as_posix()}"
            s3.put_object(Bucket=BUCKET, Key=key, Body=path.read_bytes())


def final_rows(spark) -> dict[str, dict]:
    return {
        json.dumps([item[k] for k in ("customer_id", "order_id")]): {
            "image": item,
            "version": row["_version"],
        }
        for item, row in final_items(spark, "orders")
    }


def sync(folders: list[str], env: dict[str, str]) -> None:
    command = [sys.executable, "-m", "ingestion.cli", "sync", "--table", "orders", *folders]
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]


def test_sync_on_s3_builds_the_same_table_as_on_local_paths(
    spark, clean_lakehouse, tmp_path: Path
) -> None:
    extra_jars = ",".join(str(p) for p in jars.install_aws())
    out = tmp_path / "exports"
    full = sample_exports.write_samples(out, 200, 4, ["orders"])["orders"]
    chain = orders_chain.write_orders_chain(out, 200, 4, increments=2)
    local = [str(full), *map(str, chain)]
    # On local paths in this process; on s3:// in a process of its own (the S3A jars and the
    # endpoint are settings of the JVM's start).
    assert main(["sync", "--table", "orders", *local]) == 0
    expected = final_rows(spark)
    reset_lakehouse(spark)

    with local_s3.server() as endpoint:
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        upload(s3, out / "orders", "dynamodb/orders")
        remote = [
            f"s3://{BUCKET}/dynamodb/orders/{Path(f).relative_to(out / 'orders').as_posix()}"
            for f in local
        ]
        env = {
            **os.environ,
            "LAKEHOUSE_EXTRA_JARS": extra_jars,
            "AWS_ENDPOINT_URL_S3": endpoint,
            "LAKEHOUSE_S3_PATH_STYLE": "true",
            "AWS_REGION": "us-east-1",
        }
        sync(remote, env)
        os.environ["AWS_ENDPOINT_URL_S3"] = endpoint
        try:
            checked = manifest.read_export(remote[1], verify=True)
        finally:
            os.environ.pop("AWS_ENDPOINT_URL_S3")
    assert isinstance(checked.folder, S3Path) and str(checked.files[0].path).startswith("s3://")
    spark.sql("refresh table lake.staging.orders")
    files = {r[0] for r in spark.table("lake.staging.orders").select("_source_file").collect()}
    assert files and all(f.startswith(f"s3://{BUCKET}/dynamodb/orders/") for f in files), files
    assert final_rows(spark) == expected
