"""What a job on EMR may not count on: an injected region, a Hive session catalog, egress."""

from __future__ import annotations

import pytest

from ingestion.dynamodb.tables import TableConfigError
from ingestion.jobs import sync
from ingestion.spark import spark_config


def test_the_dynamodb_client_takes_its_region_from_the_table_arn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`sync --from-dynamodb` made a bare boto3 client: on EMR, where nothing sets AWS_REGION,
    it failed with NoRegionError before any export."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    client = sync.dynamodb_client("arn:aws:dynamodb:ap-south-1:123456789012:table/orders")
    assert client.meta.region_name == "ap-south-1"
    with pytest.raises(TableConfigError, match="not a DynamoDB table ARN"):
        sync.dynamodb_client("orders")


@pytest.mark.parametrize("target", ["emr", "rehearsal"])
def test_no_hive_session_catalog_on_emr(monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    """Unset, Spark asked the session catalog first: on an application whose Hive client is
    Glue's, that needs access to Glue's `default` database, which the job role has not."""
    monkeypatch.setenv("LAKEHOUSE_WAREHOUSE", "s3://lake/warehouse")
    monkeypatch.setenv("LAKEHOUSE_REHEARSAL_CATALOG", "/tmp/c.db")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1")
    params = spark_config.profile_target(target=target)["server_side_parameters"]
    assert params["spark.sql.catalogImplementation"] == "in-memory"


def test_dbt_sends_no_anonymous_usage_events() -> None:
    """Each event waited on egress: in a VPC without a NAT gateway every dbt command waited."""
    from dbt.flags import get_flags

    from ingestion.merge import dbt_process

    dbt_process.dbt_invoke(["parse"])
    assert get_flags().SEND_ANONYMOUS_USAGE_STATS is False
