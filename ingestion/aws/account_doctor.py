"""``doctor --aws``: what an AWS account needs before the first job, checked with read-only
calls made with the caller's own credentials (one line a check, ✓ or ✗ with the fix).

Credentials and region (STS); the EMR Serverless application (release, architecture, state); for
each configured table (its ``table_arn``, else its name in the region): point-in-time recovery and
its period (exports need it), its stream and view type, and for a ``cadence: stream`` table its
stream writer's Lambda mapping, enabled and not behind (``IteratorAge``); the last verify against
DynamoDB (its ``VerifyDifferences`` metric); each Glue database: found, and not governed by Lake
Formation (a database whose ``CreateTableDefaultPermissions`` is empty is, and refuses the job role
until it is granted); the data bucket's encryption (``--bucket``): a customer KMS key, and with
``--role-arn`` whether the job role may use it (IAM's policy simulator).

What these calls cannot see (the job's Python on the application, the job role's own reach)
needs a job run on the account: see docs/on-aws.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ingestion.aws import emr, submit
from ingestion.config import names
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb.tables import TableConfig
from ingestion.jobs.inspection import METRICS_NAMESPACE
from ingestion.jobs.sync import region_of
from ingestion.project.doctor import Check

USABLE_VIEWS = ("NEW_AND_OLD_IMAGES", "NEW_IMAGE")  # the stream writer needs the new image
USABLE_STATES = ("CREATED", "STARTED", "STOPPED")  # a stopped application starts on a job
LAKE_FORMATION_GRANTS = (
    "CREATE_TABLE, ALTER, DROP and DESCRIBE on the database, SELECT, INSERT, DELETE, ALTER, "
    "DROP and DESCRIBE on all its tables and DATA_LOCATION_ACCESS on the warehouse (Lake "
    "Formation), and lakeformation:GetDataAccess (IAM)"
)


def credentials(sts: Any) -> Check:
    try:
        who = sts.get_caller_identity()
    except Exception as exc:
        return Check("credentials", False, f"{_reason(exc)}: configure AWS credentials")
    region = sts.meta.region_name
    return Check("credentials", True, f"account {who['Account']} as {who['Arn']}, {region}")


def application(client: Any, application_id: str) -> Check:
    name = f"application {application_id}"
    try:
        label, arch = emr.check_release(client, application_id)
        state = client.get_application(applicationId=application_id)["application"]["state"]
    except emr.EmrError as exc:
        return Check(name, False, str(exc))
    except Exception as exc:
        return Check(name, False, f"{_reason(exc)}: check --application-id and the region")
    if state not in USABLE_STATES:
        return Check(name, False, f"{label}, {arch}, {state}: create a new application")
    return Check(name, True, f"{label}, {arch}, {state}{emr.release_note(label)}")


def point_in_time_recovery(client: Any, table: TableConfig) -> Check:
    name = f"{table.name}: point-in-time recovery"
    try:
        found = client.describe_continuous_backups(TableName=_table_id(table))
    except Exception as exc:
        return Check(name, False, _reason(exc))
    pitr = found["ContinuousBackupsDescription"].get("PointInTimeRecoveryDescription") or {}
    if pitr.get("PointInTimeRecoveryStatus") != "ENABLED":
        return Check(
            name,
            False,
            "off: exports need it (aws dynamodb update-continuous-backups --table-name "
            f"{table.dynamodb_name} --point-in-time-recovery-specification "
            "PointInTimeRecoveryEnabled=true)",
        )
    days = pitr.get("RecoveryPeriodInDays", 35)
    return Check(name, True, f"on, {days} days: a sync may be at most {days} days late")


def stream(client: Any, lambdas: Any, watch: Any, table: TableConfig) -> Check:
    """The table's stream, for a ``cadence: stream`` table its stream writer's mapping too:
    enabled, and no more than ``MAX_ITERATOR_AGE`` behind (CloudWatch's ``IteratorAge``)."""
    name = f"{table.name}: stream"
    streamed = table.cadence == "stream"
    try:
        found = client.describe_table(TableName=_table_id(table))["Table"]
    except Exception as exc:
        return Check(name, False, _reason(exc))
    spec = found.get("StreamSpecification") or {}
    if not spec.get("StreamEnabled"):
        if streamed:
            return Check(
                name,
                False,
                "off, but the table's cadence is stream: enable its "
                "stream with NEW_AND_OLD_IMAGES and deploy the rendered template",
            )
        return Check(name, True, "off (the table is synced from exports)")
    view = spec.get("StreamViewType", "")
    if view not in USABLE_VIEWS:
        return Check(
            name,
            False,
            f"view type {view}: the stream writer needs NEW_AND_OLD_IMAGES (or NEW_IMAGE); "
            "a stream's view type cannot change: disable the stream and enable it again",
        )
    mappings = lambdas.list_event_source_mappings(EventSourceArn=found["LatestStreamArn"])
    mapped = mappings.get("EventSourceMappings", [])
    if not mapped:
        if streamed:
            return Check(
                name,
                False,
                f"{view}, read by no Lambda mapping: deploy the rendered "
                "template (its mapping feeds the watch)",
            )
        return Check(name, True, f"{view}, read by no Lambda mapping (synced from exports)")
    states = [m.get("State", "") for m in mapped]
    if "Enabled" not in states:
        return Check(
            name,
            False,
            f"{view}, its Lambda mapping is {states[0]}: enable it (aws lambda "
            "update-event-source-mapping --enabled) or the change files stop",
        )
    return _iterator_age(watch, name, view, mapped[0].get("FunctionArn", ""))


MAX_ITERATOR_AGE = 60.0  # seconds: the template's alarm fires beyond it


def _iterator_age(watch: Any, name: str, view: str, function_arn: str) -> Check:
    """The stream writer's largest ``IteratorAge`` of the last 15 minutes."""
    function = function_arn.rsplit(":", 1)[-1]
    now = datetime.now(UTC)
    points = watch.get_metric_statistics(
        Namespace="AWS/Lambda",
        MetricName="IteratorAge",
        Dimensions=[{"Name": "FunctionName", "Value": function}],
        StartTime=now - timedelta(minutes=15),
        EndTime=now,
        Period=60,
        Statistics=["Maximum"],
    ).get("Datapoints", [])
    if not points:
        return Check(name, True, f"{view}, read by {function} (no records in 15 minutes)")
    age = max(p["Maximum"] for p in points) / 1000
    if age > MAX_ITERATOR_AGE:
        return Check(
            name,
            False,
            f"{view}, {function} is {age:.0f}s behind the stream: see its "
            "errors (its log group) and the failure queue",
        )
    return Check(name, True, f"{view}, read by {function}, at most {age:.0f}s behind")


VERIFY_LOOKBACK = timedelta(days=8)  # a weekly verify's last run, with a day to spare


def last_verify(watch: Any, table: TableConfig) -> Check:
    """The table's last verify against DynamoDB (``verify --metrics``, the deployment's
    schedule): its ``VerifyDifferences`` metric of the last 8 days."""
    name = f"{table.name}: last verify"
    if table.verify == "off":
        return Check(name, True, "no schedule (verify: off in the table's entry)")
    if table.entities is not None:
        return Check(name, True, "no schedule (a single-table design is not verified yet)")
    now = datetime.now(UTC)
    try:
        points = watch.get_metric_statistics(
            Namespace=METRICS_NAMESPACE,
            MetricName="VerifyDifferences",
            Dimensions=[{"Name": "Table", "Value": table.name}],
            StartTime=now - VERIFY_LOOKBACK,
            EndTime=now,
            Period=3600,
            Statistics=["Maximum"],
        ).get("Datapoints", [])
    except Exception as exc:
        return Check(name, False, _reason(exc))
    if not points:
        return Check(
            name,
            True,
            f"none in 8 days (the {table.verify} schedule {table.name}-verify "
            f"publishes it; now: ddb-lakehouse verify --table {table.name} "
            "--from-dynamodb --metrics)",
        )
    last = max(points, key=lambda p: p["Timestamp"])
    when = last["Timestamp"].strftime("%Y-%m-%d %H:%M UTC")
    if last["Maximum"] > 0:
        return Check(
            name,
            False,
            f"{when}: {last['Maximum']:.0f} item(s) differ from DynamoDB: "
            f"ddb-lakehouse verify --table {table.name} --from-dynamodb --repair --metrics",
        )
    return Check(name, True, f"{when}: equal to DynamoDB")


def database(glue: Any, name: str) -> Check:
    title = f"glue database {name}"
    try:
        found = glue.get_database(Name=name)["Database"]
    except glue.exceptions.EntityNotFoundException:
        return Check(title, False, "not found: deploy deploy/template.yaml (it creates it)")
    except Exception as exc:
        return Check(title, False, _reason(exc))
    if not found.get("CreateTableDefaultPermissions"):
        return Check(
            title,
            False,
            "governed by Lake Formation (no default permissions): grant the job role "
            f"{LAKE_FORMATION_GRANTS}",
        )
    return Check(title, True, "found, IAM permissions apply")


def bucket_key(s3: Any, iam: Any, bucket: str, role_arn: str | None) -> Check:
    """The data bucket's default encryption: a customer-managed KMS key must be given to the
    template (``BucketKmsKeyArn``), which grants the job role and the stream writer its use;
    with the job role's ARN, IAM's policy simulator says whether the role may use it (the
    key's own policy must also let the account's IAM policies grant it, as its default does)."""
    from botocore.exceptions import ClientError

    name = f"bucket {bucket}: encryption"
    try:
        found = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]
    except ClientError as exc:
        if (
            exc.response.get("Error", {}).get("Code")
            == "ServerSideEncryptionConfigurationNotFoundError"
        ):
            return Check(name, True, "SSE-S3: no key to grant")
        return Check(name, False, _reason(exc))
    default = found["Rules"][0].get("ApplyServerSideEncryptionByDefault", {})
    algorithm, key = default.get("SSEAlgorithm", ""), default.get("KMSMasterKeyID")
    if not algorithm.startswith("aws:kms"):
        return Check(name, True, f"SSE-S3 ({algorithm or 'AES256'}): no key to grant")
    if not key or key.endswith("alias/aws/s3"):
        return Check(name, True, "SSE-KMS with the AWS managed key aws/s3: no key to grant")
    given = (
        f"deploy with BucketKmsKeyArn={key} (the job role needs kms:Decrypt and "
        f"kms:GenerateDataKey on it, the stream writer kms:GenerateDataKey)"
    )
    if not role_arn or not key.startswith("arn:"):
        return Check(name, True, f"SSE-KMS with {key}: {given}; --role-arn checks the job role")
    results = iam.simulate_principal_policy(
        PolicySourceArn=role_arn, ActionNames=list(KMS_ACTIONS), ResourceArns=[key]
    )["EvaluationResults"]
    denied = [r["EvalActionName"] for r in results if r["EvalDecision"] != "allowed"]
    if denied:
        return Check(
            name,
            False,
            f"SSE-KMS with {key}: the job role may not {', '.join(denied)} on it: {given}",
        )
    return Check(name, True, f"SSE-KMS with {key}: the job role may use it")


KMS_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")


def _reason(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    error = response.get("Error") or {}
    if error:
        return f"{error.get('Code')}: {error.get('Message')}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


@dataclass(frozen=True)
class Account:
    tables: tuple[TableConfig, ...]
    application_id: str | None = None
    databases: tuple[str, ...] = (names.STAGING, names.FINAL)
    region: str | None = None
    bucket: str | None = None  # the data bucket (the template's BucketName)
    role_arn: str | None = None  # the job role


def aws_checks(account: Account, client: Callable[..., Any] | None = None) -> list[Check]:
    """Every check of ``account``; ``client(service, region)`` makes the clients (boto3's by
    default; a table's DynamoDB client is in its ARN's region)."""
    make = client or _client
    region = account.region or (None if client else _default_region())
    if not region and not client:
        return [Check("credentials", False, "no region: pass --region or set AWS_REGION")]
    checks = [credentials(make("sts", region))]
    if not checks[0].ok:
        return checks
    if account.application_id:
        checks.append(application(make("emr-serverless", region), account.application_id))
    for table in account.tables:
        where = region_of(table.table_arn) if table.table_arn else region
        dynamodb = make("dynamodb", where)
        checks.append(point_in_time_recovery(dynamodb, table))
        watch = make("cloudwatch", where)
        checks.append(stream(dynamodb, make("lambda", where), watch, table))
        checks.append(last_verify(watch, table))
    glue = make("glue", region)
    checks += [database(glue, name) for name in account.databases]
    if account.bucket:
        checks.append(
            bucket_key(make("s3", region), make("iam", region), account.bucket, account.role_arn)
        )
    return checks


def _table_id(table: TableConfig) -> str:
    """What DynamoDB's describe calls take: the ARN when configured, else the table's name in
    the checked region."""
    return table.table_arn or table.dynamodb_name


def _default_region() -> str | None:
    import boto3

    return boto3.session.Session().region_name


def _client(service: str, region: str | None) -> Any:
    import boto3

    return boto3.client(service, region_name=region)


# A probe is one small job run (emr.WATCH_SIZE: a 1-vCPU driver and executor, 4 GB workers) of
# about two minutes, start-up included, at us-east-1 list prices ($0.052624 per vCPU-hour,
# $0.0057785 per GB-hour; EMR Serverless bills each worker at least a minute).
PROBE_COST = (
    "--probe starts one job run on the application: two 1-vCPU / 4 GB workers for about 2 "
    "minutes, about $0.01 at us-east-1 list prices"
)


def probe(submission: submit.Submission, report: Callable[[str], Any]) -> Check:
    """``doctor --in-job`` run on the application through ``emr submit``: what only a job can
    show (its Python and dbt, Iceberg on the classpath, both databases, the warehouse)."""
    try:
        submit.submit(submission, report, wait=True, poll=15)
    except LakehouseError as exc:
        return Check("probe job run", False, f"{exc} (the job's driver log has each check)")
    return Check(
        "probe job run",
        True,
        "the job's Python, dbt, Iceberg, the decoder, both databases and a scratch table",
    )
