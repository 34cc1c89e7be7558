"""`doctor`: this machine's checks for real, and each AWS check against botocore's Stubber (a
test double for AWS's control plane only), failing and passing, with its exact line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aws_calls
import boto3
import pytest
from botocore.config import Config
from botocore.stub import ANY, Stubber
from support import with_old_key_test

from ingestion import cli
from ingestion.aws import account_doctor
from ingestion.dynamodb.tables import get_table

ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/orders"
STREAM = ARN + "/stream/2026-11-24T00:00:00.000"


def _client(service: str) -> Any:
    return boto3.client(
        service, region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x"
    )


def _table() -> Any:
    return get_table("orders").model_copy(update={"table_arn": ARN})


def test_doctor_on_this_machine(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out[:5]] == [
        "✓ java",
        "✓ jars",
        "✓ catalog",
        "✓ dbt project",
        "✓ disk",
    ]
    assert out[-1] == "5 of 5 checks passed"


def test_a_broken_dbt_project_fails_its_check(project_copy, capsys) -> None:
    (project_copy / "models" / "marts" / "books.sql").write_text("{{ config(\n")
    assert cli.main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "✗ dbt project: `dbt parse` failed" in out and "4 of 5 checks passed" in out


def test_doctor_parses_a_model_written_before_a_tests_rename(project_copy, capsys) -> None:
    """`dbt parse` would not know `unique_combination_of_columns` any more: doctor migrates the
    model YAML first (merge.model_tests.migrate_models), as a merge does."""
    path = project_copy / "models" / "marts" / "orders.yml"
    migrated = with_old_key_test(path)
    assert cli.main(["doctor"]) == 0
    assert "✓ dbt project" in capsys.readouterr().out
    assert path.read_text() == migrated


def test_credentials() -> None:
    sts = _client("sts")
    with Stubber(sts) as stub:
        stub.add_client_error("get_caller_identity", "ExpiredToken", "The security token expired")
        assert account_doctor.credentials(sts).line() == (
            "✗ credentials: ExpiredToken: The security token expired: configure AWS credentials"
        )
        stub.add_response(
            "get_caller_identity",
            {
                "Account": "123456789012",
                "Arn": "arn:aws:iam::123456789012:user/ana",
                "UserId": "AIDA",
            },
        )
        assert account_doctor.credentials(sts).line() == (
            "✓ credentials: account 123456789012 as arn:aws:iam::123456789012:user/ana, eu-west-1"
        )


def _application(release: str, state: str) -> dict:
    return {
        "application": {
            "applicationId": "app-1",
            "name": "lake",
            "arn": "arn:aws:emr-serverless:eu-west-1:123456789012:/applications/app-1",
            "releaseLabel": release,
            "type": "Spark",
            "state": state,
            "createdAt": 0,
            "updatedAt": 0,
            "architecture": "ARM64",
        }
    }


def test_application() -> None:
    client = _client("emr-serverless")
    with Stubber(client) as stub:
        stub.add_response("get_application", _application("emr-7.5.0", "CREATED"))
        assert account_doctor.application(client, "app-1").line() == (
            "✗ application app-1: application app-1 runs emr-7.5.0; this project needs "
            "emr-7.7.0 or later (Iceberg 1.7 or later, for maintain's remove-dangling-deletes): "
            "create an application with release emr-7.7.0 or later"
        )
        for _ in range(2):
            stub.add_response("get_application", _application("emr-7.9.0", "TERMINATED"))
        assert account_doctor.application(client, "app-1").line() == (
            "✗ application app-1: emr-7.9.0, arm64, TERMINATED: create a new application"
        )
        for _ in range(2):
            stub.add_response("get_application", _application("emr-7.9.0", "STOPPED"))
        # emr-7.9 ships Iceberg 1.7.1; the project is tested on the 1.10 line (emr-7.12 on).
        assert account_doctor.application(client, "app-1").line() == (
            "✓ application app-1: emr-7.9.0, arm64, STOPPED (runs; the project is tested on the "
            "Iceberg line of emr-7.12.0 and later: an application on it is recommended)"
        )
        for _ in range(2):
            stub.add_response("get_application", _application("emr-7.12.0", "STOPPED"))
        assert account_doctor.application(client, "app-1").line() == (
            "✓ application app-1: emr-7.12.0, arm64, STOPPED"
        )
        stub.add_client_error(
            "get_application", "ResourceNotFoundException", "Application not found"
        )
        assert account_doctor.application(client, "app-1").line() == (
            "✗ application app-1: ResourceNotFoundException: Application not found: check "
            "--application-id and the region"
        )


def _backups(status: str) -> dict:
    return {
        "ContinuousBackupsDescription": {
            "ContinuousBackupsStatus": "ENABLED",
            "PointInTimeRecoveryDescription": {
                "PointInTimeRecoveryStatus": status,
                "RecoveryPeriodInDays": 7,
            },
        }
    }


def test_point_in_time_recovery() -> None:
    client = _client("dynamodb")
    with Stubber(client) as stub:
        stub.add_response("describe_continuous_backups", _backups("DISABLED"), {"TableName": ARN})
        assert account_doctor.point_in_time_recovery(client, _table()).line() == (
            "✗ orders: point-in-time recovery: off: exports need it (aws dynamodb "
            "update-continuous-backups --table-name orders --point-in-time-recovery-specification "
            "PointInTimeRecoveryEnabled=true)"
        )
        stub.add_response("describe_continuous_backups", _backups("ENABLED"), {"TableName": ARN})
        assert account_doctor.point_in_time_recovery(client, _table()).line() == (
            "✓ orders: point-in-time recovery: on, 7 days: a sync may be at most 7 days late"
        )


def _described(view: str | None) -> dict:
    table: dict[str, Any] = {"TableName": "orders", "TableArn": ARN}
    if view:
        table["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": view}
        table["LatestStreamArn"] = STREAM
    return {"Table": table}


def _mappings(*states: str) -> dict:
    function = "arn:aws:lambda:eu-west-1:123456789012:function:dynamodb-lakehouse-stream-writer"
    return {
        "EventSourceMappings": [
            {"UUID": f"{i:036d}", "State": s, "FunctionArn": function} for i, s in enumerate(states)
        ]
    }


def _ages(*milliseconds: float) -> dict:
    return {"Label": "IteratorAge", "Datapoints": [{"Maximum": m} for m in milliseconds]}


def test_stream() -> None:
    client, lambdas, watch = _client("dynamodb"), _client("lambda"), _client("cloudwatch")
    daily = _table()
    streamed = daily.model_copy(update={"cadence": "stream"})
    with Stubber(client) as stub, Stubber(lambdas) as lstub, Stubber(watch) as wstub:
        stub.add_response("describe_table", _described(None), {"TableName": ARN})
        assert account_doctor.stream(client, lambdas, watch, daily).line() == (
            "✓ orders: stream: off (the table is synced from exports)"
        )
        stub.add_response("describe_table", _described(None), {"TableName": ARN})
        assert account_doctor.stream(client, lambdas, watch, streamed).line() == (
            "✗ orders: stream: off, but the table's cadence is stream: enable its stream with "
            "NEW_AND_OLD_IMAGES and deploy the rendered template"
        )
        stub.add_response("describe_table", _described("KEYS_ONLY"), {"TableName": ARN})
        assert account_doctor.stream(client, lambdas, watch, streamed).line() == (
            "✗ orders: stream: view type KEYS_ONLY: the stream writer needs NEW_AND_OLD_IMAGES "
            "(or NEW_IMAGE); a stream's view type cannot change: disable the stream and enable "
            "it again"
        )
        stub.add_response("describe_table", _described("NEW_AND_OLD_IMAGES"), {"TableName": ARN})
        lstub.add_response("list_event_source_mappings", _mappings(), {"EventSourceArn": STREAM})
        assert account_doctor.stream(client, lambdas, watch, streamed).line() == (
            "✗ orders: stream: NEW_AND_OLD_IMAGES, read by no Lambda mapping: deploy the rendered "
            "template (its mapping feeds the watch)"
        )
        stub.add_response("describe_table", _described("NEW_AND_OLD_IMAGES"), {"TableName": ARN})
        lstub.add_response(
            "list_event_source_mappings", _mappings("Disabled"), {"EventSourceArn": STREAM}
        )
        assert account_doctor.stream(client, lambdas, watch, streamed).line() == (
            "✗ orders: stream: NEW_AND_OLD_IMAGES, its Lambda mapping is Disabled: enable it "
            "(aws lambda update-event-source-mapping --enabled) or the change files stop"
        )
        for ages, expected in (
            (
                (1200.0, 250000.0),
                "✗ orders: stream: NEW_AND_OLD_IMAGES, dynamodb-lakehouse-stream-writer is 250s "
                "behind the stream: see its errors (its log group) and the failure queue",
            ),
            (
                (1200.0, 3000.0),
                "✓ orders: stream: NEW_AND_OLD_IMAGES, read by dynamodb-lakehouse-stream-writer, "
                "at most 3s behind",
            ),
        ):
            stub.add_response(
                "describe_table", _described("NEW_AND_OLD_IMAGES"), {"TableName": ARN}
            )
            lstub.add_response(
                "list_event_source_mappings", _mappings("Enabled"), {"EventSourceArn": STREAM}
            )
            wstub.add_response("get_metric_statistics", _ages(*ages))
            assert account_doctor.stream(client, lambdas, watch, streamed).line() == expected


def test_a_table_without_an_arn_is_checked_by_its_name() -> None:
    client = _client("dynamodb")
    with Stubber(client) as stub:
        stub.add_client_error(
            "describe_continuous_backups", "TableNotFoundException", "Table not found: orders"
        )
        assert account_doctor.point_in_time_recovery(client, get_table("orders")).line() == (
            "✗ orders: point-in-time recovery: TableNotFoundException: Table not found: orders"
        )


def test_no_region_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    checks = account_doctor.aws_checks(account_doctor.Account((_table(),), "app-1"))
    assert [c.line() for c in checks] == [
        "✗ credentials: no region: pass --region or set AWS_REGION"
    ]


def test_glue_database_and_lake_formation() -> None:
    glue = _client("glue")
    with Stubber(glue) as stub:
        stub.add_client_error("get_database", "EntityNotFoundException", "no such database")
        assert account_doctor.database(glue, "staging").line() == (
            "✗ glue database staging: not found: deploy deploy/template.yaml (it creates it)"
        )
        stub.add_response(
            "get_database", {"Database": {"Name": "staging", "CreateTableDefaultPermissions": []}}
        )
        assert account_doctor.database(glue, "staging").line() == (
            "✗ glue database staging: governed by Lake Formation (no default permissions): "
            "grant the job role CREATE_TABLE, ALTER, DROP and DESCRIBE on the database, SELECT, "
            "INSERT, DELETE, ALTER, DROP and DESCRIBE on all its tables and DATA_LOCATION_ACCESS "
            "on the warehouse (Lake Formation), and lakeformation:GetDataAccess (IAM)"
        )
        everyone = [
            {
                "Principal": {"DataLakePrincipalIdentifier": "IAM_ALLOWED_PRINCIPALS"},
                "Permissions": ["ALL"],
            }
        ]
        stub.add_response(
            "get_database",
            {"Database": {"Name": "staging", "CreateTableDefaultPermissions": everyone}},
        )
        assert account_doctor.database(glue, "staging").line() == (
            "✓ glue database staging: found, IAM permissions apply"
        )


def test_aws_checks_stop_at_missing_credentials() -> None:
    sts = _client("sts")
    with Stubber(sts) as stub:
        stub.add_client_error("get_caller_identity", "InvalidClientTokenId", "bad token")
        checks = account_doctor.aws_checks(
            account_doctor.Account((_table(),), "app-1"), lambda *_: sts
        )
    assert [c.name for c in checks] == ["credentials"] and not checks[0].ok


def test_the_probe_is_doctor_in_one_small_job(capsys: pytest.CaptureFixture[str]) -> None:
    """`--probe` submits `doctor --in-job` as `emr submit` would, sized as small as a watch,
    and says what it costs first; `--dry-run` prints the request and sends nothing."""
    import json

    from ingestion.aws import contracts

    command = ["doctor", "--aws", "--probe", "--dry-run", "--application-id", "00fabcdefgh12345"]
    command += ["--code", "s3://code/p", "--role-arn", "arn:aws:iam::123456789012:role/job"]
    command += ["--region", "eu-west-1"]
    assert cli.main([*command, "--warehouse", "s3://lake/warehouse"]) == 0
    out = capsys.readouterr().out
    assert account_doctor.PROBE_COST in out
    request = json.loads(out[out.index("StartJobRun ") + 12 : out.index("\n}") + 2])
    job = request["jobDriver"]["sparkSubmit"]
    assert job["entryPointArguments"] == ["doctor", "--in-job"]
    assert "spark.executor.instances=1" in job["sparkSubmitParameters"]
    assert "spark.executorEnv.AWS_REGION=eu-west-1" in job["sparkSubmitParameters"]
    contracts.check("emr-serverless", "StartJobRun", request)
    assert cli.main(command) == 2
    assert "--probe needs --application-id, --code, --role-arn and --warehouse" in (
        capsys.readouterr().err
    )
    assert cli.main(["doctor", "--dry-run"]) == 2
    assert "--dry-run goes with --probe" in capsys.readouterr().err


def test_each_local_check_fails_with_its_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This machine's checks, each made to fail for real: no java on PATH, a missing jar, a
    catalog that is no SQLite file, too little disk, a dbt project that does not parse."""
    from ingestion.project import doctor as local
    from ingestion.spark import jars

    monkeypatch.setenv("PATH", str(tmp_path))  # no java there
    assert local.java().line() == "✗ java: no java on PATH: install OpenJDK 17 (make setup)"
    monkeypatch.undo()

    monkeypatch.setattr(jars, "pyspark_jars_dir", lambda: tmp_path)
    check = local.jars()
    assert (
        not check.ok
        and f"{tmp_path}/" in check.detail
        and "is missing (run `make setup`" in check.detail
    )
    monkeypatch.undo()

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("LAKEHOUSE_HOME", str(home))
    (home / "catalog.db").write_text("not a database")
    assert (
        local.catalog().line()
        == f"✗ catalog: {home / 'catalog.db'} is no SQLite file: move it away"
    )

    monkeypatch.setattr(local, "MIN_FREE_GB", 1e9)
    check = local.disk()
    assert not check.ok and check.detail.endswith(f"under {home}: free at least 1e+09 GB")

    project = tmp_path / "project"
    project.mkdir()
    (project / "dbt_project.yml").write_text("name: [unclosed\n")
    monkeypatch.setenv("LAKEHOUSE_PROJECT_DIR", str(project))
    check = local.dbt_project()
    assert not check.ok and check.detail.startswith("`dbt parse` failed"), check.detail


def test_a_failed_probe_says_where_its_checks_are(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe's job run ends FAILED: the check fails with EMR's reason and points at the
    driver log. The upload and StartJobRun are left out (the submission is replaced by its
    wait); GetJobRun answers through the Stubber."""
    from datetime import UTC, datetime

    from ingestion.aws import emr, submit

    client = _client("emr-serverless")
    stub = Stubber(client)
    now = datetime.now(UTC)
    run = {
        "applicationId": "app-1",
        "jobRunId": "run-1",
        "arn": "arn:aws:emr-serverless:eu-west-1:123456789012:/applications/app-1/jobruns/run-1",
        "createdBy": "arn:aws:iam::123456789012:user/u",
        "createdAt": now,
        "updatedAt": now,
        "executionRole": "arn:aws:iam::123456789012:role/job",
        "state": "FAILED",
        "stateDetails": "Job failed, ExitCode: 1",
        "releaseLabel": "emr-7.7.0",
        "jobDriver": {"sparkSubmit": {"entryPoint": "s3://code/main.py"}},
    }
    stub.add_response(
        "get_job_run", {"jobRun": run}, {"applicationId": "app-1", "jobRunId": "run-1"}
    )

    def submitted(*args: Any, **kwargs: Any) -> None:
        state = emr.serverless_state(client, "app-1", "run-1")
        emr.wait(state, emr.DONE_SERVERLESS, emr.FAILED_SERVERLESS, "job run run-1", 0, print)

    monkeypatch.setattr(submit, "submit", submitted)
    with stub:
        check = account_doctor.probe(None, print)  # type: ignore[arg-type]
    assert not check.ok and check.name == "probe job run"
    assert check.detail.startswith("job run run-1: FAILED after 0s: Job failed, ExitCode: 1")
    assert check.detail.endswith("(the job's driver log has each check)")


@pytest.mark.slow
def test_doctor_in_a_job_checks_what_only_a_job_can(spark, capsys) -> None:
    """What the probe's job prints: here on the local target (the EMR rehearsal runs it as a
    job, tests/aws/test_emr_rehearsal.py)."""
    assert cli.main(["doctor", "--in-job"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out[:-1]] == [
        "✓ python",
        "✓ dbt",
        "✓ iceberg",
        "✓ decoder",
        "✓ database staging",
        "✓ database lakehouse",
        "✓ warehouse",
    ]
    assert "1.10.2" in out[2]
    assert not [t for t in spark.sql("show tables in lake.staging").collect() if "doctor" in t[1]]


def test_local_checks_fail_with_their_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from ingestion.project import doctor as local

    monkeypatch.setenv("PATH", str(tmp_path))  # no java on it
    assert local.java().line() == "✗ java: no java on PATH: install OpenJDK 17 (make setup)"
    monkeypatch.setattr(local, "MIN_FREE_GB", 10**9)
    assert (
        local.disk().line().startswith("✗ disk: ")
        and "free at least 1e+09 GB" in local.disk().line()
    )
    bad = tmp_path / "catalog.db"
    bad.write_text("not a database")
    monkeypatch.setattr("ingestion.catalog.table_metadata.catalog_file", lambda: bad)
    assert local.catalog().line() == f"✗ catalog: {bad} is no SQLite file: move it away"


def test_last_verify() -> None:
    """The table's last verify against DynamoDB, from the metric `verify --metrics` publishes:
    none yet, equal, or differences (naming the repair); no call for a table with verify off."""
    watch = _client("cloudwatch")
    wanted = {
        "Namespace": "DynamoDBLakehouse",
        "MetricName": "VerifyDifferences",
        "Dimensions": [{"Name": "Table", "Value": "orders"}],
        "StartTime": ANY,
        "EndTime": ANY,
        "Period": 3600,
        "Statistics": ["Maximum"],
    }
    sunday = datetime(2026, 11, 22, 5, 31, tzinfo=UTC)
    with Stubber(watch) as stub:
        for points in ([], [(sunday, 0.0)], [(sunday - timedelta(days=7), 0.0), (sunday, 3.0)]):
            answer = [{"Timestamp": t, "Maximum": m} for t, m in points]
            stub.add_response("get_metric_statistics", {"Datapoints": answer}, wanted)
        assert account_doctor.last_verify(watch, _table()).line() == (
            "✓ orders: last verify: none in 8 days (the weekly schedule orders-verify publishes "
            "it; now: ddb-lakehouse verify --table orders --from-dynamodb --metrics)"
        )
        assert account_doctor.last_verify(watch, _table()).line() == (
            "✓ orders: last verify: 2026-11-22 05:31 UTC: equal to DynamoDB"
        )
        assert account_doctor.last_verify(watch, _table()).line() == (
            "✗ orders: last verify: 2026-11-22 05:31 UTC: 3 item(s) differ from DynamoDB: "
            "ddb-lakehouse verify --table orders --from-dynamodb --repair --metrics"
        )
        assert account_doctor.last_verify(
            watch, _table().model_copy(update={"verify": "off"})
        ).line() == ("✓ orders: last verify: no schedule (verify: off in the table's entry)")


def test_the_probe_reaches_each_service_of_the_job_or_names_its_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A job in a VPC without a NAT gateway reaches no AWS service without its endpoint:
    `doctor --probe` calls DynamoDB, Glue, S3 and CloudWatch from inside the job (the EMR
    rehearsal runs these in its job) and names the endpoint each one needs."""
    import local_s3

    from ingestion.project import doctor as in_job

    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("LAKEHOUSE_WAREHOUSE", f"s3://{aws_calls.BUCKET}/warehouse")

    def at(url: str) -> Any:
        return lambda service, region: boto3.client(
            service,
            region_name=region,
            endpoint_url=url,
            aws_access_key_id="x",
            aws_secret_access_key="x",
            config=Config(connect_timeout=1, read_timeout=2, retries={"max_attempts": 1}),
        )

    with local_s3.server() as endpoint:  # moto's server: every service answers
        reached = in_job.endpoint_checks(at(endpoint))
    assert [c.name for c in reached] == [
        "reach dynamodb",
        "reach glue",
        "reach s3",
        "reach cloudwatch",
    ]
    assert all(c.ok and c.detail.startswith(f"{endpoint} answered") for c in reached), reached
    closed = in_job.endpoint_checks(at("http://127.0.0.1:1"))  # nothing listens: no route
    assert not any(c.ok for c in closed)
    assert closed[0].line() == (
        "✗ reach dynamodb: cannot reach http://127.0.0.1:1 (EndpointConnectionError): in a VPC "
        "without a NAT gateway, add the endpoint com.amazonaws.eu-west-1.dynamodb"
    )
    assert closed[3].detail.endswith("com.amazonaws.eu-west-1.monitoring")  # CloudWatch's name

    refused = _client("dynamodb")
    stub = Stubber(refused)
    stub.add_client_error("list_exports", "AccessDeniedException", "not authorized")
    with stub:
        denied = in_job._reach(
            "dynamodb", "eu-west-1", lambda s, r: refused, lambda c: c.list_exports(MaxResults=1)
        )
    assert (
        denied.line() == "✗ reach dynamodb: reached, refused: AccessDeniedException: not authorized"
    )

    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    assert [c.name for c in in_job.endpoint_checks(at(endpoint))] == ["region"]


def test_a_bucket_encrypted_with_a_customer_key_names_the_grant_the_job_role_needs() -> None:
    """An existing export bucket encrypted with a customer KMS key needs kms:Decrypt and
    kms:GenerateDataKey for the job role: the template grants them when given the key
    (BucketKmsKeyArn), and doctor says so, checking the role with IAM's policy simulator."""
    key = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    role = "arn:aws:iam::123456789012:role/lakehouse-job"
    s3, iam = _client("s3"), _client("iam")

    def encrypted(algorithm: str, key_id: str | None) -> dict:
        default = {"SSEAlgorithm": algorithm} | ({"KMSMasterKeyID": key_id} if key_id else {})
        return {
            "ServerSideEncryptionConfiguration": {
                "Rules": [{"ApplyServerSideEncryptionByDefault": default}]
            }
        }

    def decisions(*allowed: bool) -> dict:
        return {
            "EvaluationResults": [
                {"EvalActionName": a, "EvalDecision": "allowed" if ok else "implicitDeny"}
                for a, ok in zip(account_doctor.KMS_ACTIONS, allowed, strict=True)
            ]
        }

    asked = {
        "PolicySourceArn": role,
        "ActionNames": list(account_doctor.KMS_ACTIONS),
        "ResourceArns": [key],
    }
    with Stubber(s3) as s3_stub, Stubber(iam) as iam_stub:
        s3_stub.add_response("get_bucket_encryption", encrypted("AES256", None), {"Bucket": "lake"})
        assert account_doctor.bucket_key(s3, iam, "lake", role).line() == (
            "✓ bucket lake: encryption: SSE-S3 (AES256): no key to grant"
        )
        managed = encrypted("aws:kms", "arn:aws:kms:eu-west-1:123456789012:alias/aws/s3")
        s3_stub.add_response("get_bucket_encryption", managed, {"Bucket": "lake"})
        assert account_doctor.bucket_key(s3, iam, "lake", role).line() == (
            "✓ bucket lake: encryption: SSE-KMS with the AWS managed key aws/s3: no key to grant"
        )
        s3_stub.add_response("get_bucket_encryption", encrypted("aws:kms", key), {"Bucket": "lake"})
        iam_stub.add_response("simulate_principal_policy", decisions(False, True), asked)
        assert account_doctor.bucket_key(s3, iam, "lake", role).line() == (
            f"✗ bucket lake: encryption: SSE-KMS with {key}: the job role may not kms:Decrypt on "
            f"it: deploy with BucketKmsKeyArn={key} (the job role needs kms:Decrypt and "
            "kms:GenerateDataKey on it, the stream writer kms:GenerateDataKey)"
        )
        s3_stub.add_response("get_bucket_encryption", encrypted("aws:kms", key), {"Bucket": "lake"})
        iam_stub.add_response("simulate_principal_policy", decisions(True, True), asked)
        assert account_doctor.bucket_key(s3, iam, "lake", role).ok
        s3_stub.add_response("get_bucket_encryption", encrypted("aws:kms", key), {"Bucket": "lake"})
        without_role = account_doctor.bucket_key(s3, iam, "lake", None)
        assert without_role.ok and f"BucketKmsKeyArn={key}" in without_role.detail
        assert without_role.detail.endswith("--role-arn checks the job role")
        s3_stub.add_client_error("get_bucket_encryption", "AccessDenied", "Access Denied")
        assert account_doctor.bucket_key(s3, iam, "lake", role).line() == (
            "✗ bucket lake: encryption: AccessDenied: Access Denied"
        )
