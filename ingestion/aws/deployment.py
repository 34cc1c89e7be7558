"""The CloudFormation template, rendered from the table configuration (``deploy render``).

Every configured table gets its resources from its entry: its ARN as a parameter, the job
role's export permissions on it, and by its ``cadence`` either a daily ``sync`` from incremental
exports and a weekly ``maintain`` (``daily``), or its stream's Lambda mapping (``stream``); and
a ``verify`` against a full export by its ``verify`` (weekly by default). One
long-running ``watch`` serves every stream table (one JVM, one lease per table): the hot path
costs one small always-on job however many hot tables there are. The shared part (bucket,
stream writer, Glue databases, roles, dead-letter queue) is ``deployment_shared``'s.

``deploy/template.yaml`` is this rendering of the shipped configuration (a test compares them):
adding a table never means editing CloudFormation by hand.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ingestion.aws import contracts, emr, packaging
from ingestion.aws import deployment_shared as shared
from ingestion.dynamodb.tables import TableConfig, TableConfigError

DAILY = "cron(30 2 * * ? *)"
WEEKLY = "cron(30 4 ? * SUN *)"
WATCH_STARTS = "rate(1 hour)"
VERIFY_SCHEDULES = {"weekly": "cron(30 5 ? * SAT *)", "daily": "cron(30 5 * * ? *)"}
HEADER = (
    "# Rendered from dbt_project.yml's tables by `ddb-lakehouse deploy render`: edit the table\n"
    "# configuration and render again rather than this file (docs/on-aws.md).\n"
)


def camel(name: str) -> str:
    """A CloudFormation logical name from a lakehouse name (``app_users`` -> ``AppUsers``)."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)


def table_arn(table: TableConfig) -> str:
    return f"{camel(table.name)}TableArn"


def stream_arn(table: TableConfig) -> str:
    return f"{camel(table.name)}StreamArn"


def render(tables: list[TableConfig]) -> dict[str, Any]:
    """The template for ``tables`` (each by its ``cadence``)."""
    if not tables:
        raise TableConfigError("no table is configured: add one (add-table), then render")
    streamed = [t for t in tables if t.cadence == "stream"]
    daily = [t for t in tables if t.cadence != "stream"]
    parameters = shared.parameters(packaging.lambda_key())
    for table in tables:
        parameters[table_arn(table)] = {
            "Type": "String",
            "Description": f"ARN of the DynamoDB table {table.dynamodb_name} "
            "(point-in-time recovery on).",
        }
    for table in streamed:
        parameters[stream_arn(table)] = {
            "Type": "String",
            "Description": f"ARN of the {table.dynamodb_name} table's stream "
            "(view type NEW_AND_OLD_IMAGES).",
        }
    resources = shared.bucket_and_catalog()
    resources["JobRole"] = shared.job_role([table_arn(t) for t in tables])
    resources.update(shared.scheduling())
    resources.update(shared.notifications())
    if streamed:
        resources.update(shared.stream_writer([stream_arn(t) for t in streamed]))
        for table in streamed:
            resources[f"{camel(table.name)}StreamMapping"] = shared.stream_mapping(
                stream_arn(table)
            )
        resources["Watch"] = _watch(streamed)
    resources["JobKeyAccess"] = shared.key_access("JobRole", shared.READ_WRITE_KEY)
    if streamed:
        resources["StreamWriterKeyAccess"] = shared.key_access("StreamWriterRole", shared.WRITE_KEY)
    for table in daily:
        resources[f"{camel(table.name)}Sync"] = _daily_sync(table)
        resources[f"{camel(table.name)}Maintain"] = _weekly_maintain(table)
    for table in tables:
        if verified(table):
            resources[f"{camel(table.name)}Verify"] = _verify(table)
    names = ", ".join(f"{t.name} ({t.cadence})" for t in tables)
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "dynamodb-lakehouse for the tables " + names + ": the data bucket, "
        "the stream writer, the Glue databases, the job role and the schedules.",
        "Parameters": parameters,
        "Conditions": shared.conditions(),
        "Resources": resources,
        "Outputs": shared.outputs(bool(streamed)),
    }


def _parameters(watch: bool) -> str:
    code = ("s3://${CodeBucket}/${JobArchiveKey}", "s3://${BucketName}/warehouse")
    deps = "s3://${CodeBucket}/${JobDependenciesKey}"
    return emr.spark_parameters(
        *code, deps, watch=watch, databases=shared.DATABASES, region="${AWS::Region}"
    )


def job_input(name: str, arguments: list[str], watch: bool = False) -> str:
    """A schedule's StartJobRun input (Scheduler's member names), for ``Fn::Sub``: the same
    parameters ``emr submit`` sends, and the client token StartJobRun requires."""
    job: dict[str, Any] = {
        "ApplicationId": "${EmrApplicationId}",
        "ExecutionRoleArn": "${JobRole.Arn}",
        "ClientToken": "<aws.scheduler.execution-id>",
        "Name": name,
    }
    if watch:
        job["Mode"] = "STREAMING"
        job["RetryPolicy"] = {"MaxFailedAttemptsPerHour": emr.WATCH_RETRIES}
        job["ExecutionTimeoutMinutes"] = emr.NO_TIMEOUT
    job["JobDriver"] = {
        "SparkSubmit": {
            "EntryPoint": "s3://${CodeBucket}/${JobEntryPointKey}",
            "EntryPointArguments": arguments,
            "SparkSubmitParameters": _parameters(watch),
        }
    }
    return json.dumps(job, indent=1)


# The Scheduler's universal target for StartJobRun, in the stack's partition (aws, aws-cn,
# aws-us-gov).
START_JOB_RUN = "arn:${AWS::Partition}:scheduler:::aws-sdk:emrserverless:startJobRun"


def _schedule(description: str, expression: str, name: str, arguments: list[str], watch: bool = False) -> dict[str, Any]:  # fmt: skip
    return {
        "Type": "AWS::Scheduler::Schedule",
        "Properties": {
            "Description": description,
            "ScheduleExpression": expression,
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "Target": {
                "Arn": {"Fn::Sub": START_JOB_RUN},
                "RoleArn": {"Fn::GetAtt": ["SchedulerRole", "Arn"]},
                # A start that still fails after the retries lands in the queue with its
                # error, instead of leaving no trace but a metric.
                "DeadLetterConfig": {"Arn": {"Fn::GetAtt": ["ScheduleFailures", "Arn"]}},
                "RetryPolicy": {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 5},
                "Input": {"Fn::Sub": job_input(name, arguments, watch)},
            },
        },
    }


def _watch(tables: list[TableConfig]) -> dict[str, Any]:
    arguments = ["watch"]
    for table in tables:
        arguments += ["--table", table.name]
    arguments += ["--stream", "s3://${BucketName}/${StreamPrefix}", "--if-free"]
    listed = ", ".join(t.name for t in tables)
    return _schedule(
        f"Keeps one watch of {listed} running: a long-running EMR Serverless job run in "
        "STREAMING mode (the service restarts it after a failure, at most "
        f"{emr.WATCH_RETRIES} times an hour). Started every hour; a run that finds the tables' "
        "leases held by a live watch exits at once with success (watch --if-free), so runs "
        "never overlap; a dead watch's leases are taken over within 2 minutes.",
        WATCH_STARTS,
        "lakehouse-watch",
        arguments,
        watch=True,
    )


def _exports_of(table: TableConfig) -> list[str]:
    """The arguments that say which table DynamoDB exports, and where to."""
    return ["--table-arn", "${" + table_arn(table) + "}", "--to", "s3://${BucketName}/${ExportPrefix}"]  # fmt: skip


def _daily_sync(table: TableConfig) -> dict[str, Any]:
    arguments = ["sync", "--table", table.name, "--from-dynamodb", *_exports_of(table)]
    return _schedule(
        f"{table.name} from DynamoDB incremental exports, daily.",
        DAILY,
        f"{table.name}-daily",
        arguments,
    )


def _weekly_maintain(table: TableConfig) -> dict[str, Any]:
    return _schedule(
        f"{table.name} compacted weekly: small files merged, the ledger carried forward, old "
        "snapshots expired and orphan files removed (a watch does this for its own tables).",
        WEEKLY,
        f"{table.name}-maintain",
        ["maintain", "--table", table.name],
    )


def verified(table: TableConfig) -> bool:
    """Whether the template schedules a verify of ``table``: its ``verify`` is not off, and it
    is no single-table design (verify refuses one: docs/known-limits.md)."""
    return table.verify != "off" and table.entities is None


def _verify(table: TableConfig) -> dict[str, Any]:
    arguments = ["verify", "--table", table.name, "--from-dynamodb", *_exports_of(table)]
    return _schedule(
        f"{table.name} verified against a full export of its DynamoDB table, {table.verify} "
        "(verify: in its entry): the counts go to CloudWatch (DynamoDBLakehouse), a run that "
        "finds differences fails; repair with verify --from-dynamodb --repair.",
        VERIFY_SCHEDULES[table.verify],
        f"{table.name}-verify",
        [*arguments, "--metrics"],
    )


def to_yaml(template: dict[str, Any]) -> str:
    """The template as YAML: a schedule's input as a block of JSON lines, no line folded."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    # CloudFormation refuses YAML aliases: a value used twice is written twice.
    Dumper.ignore_aliases = lambda self, data: True  # type: ignore[method-assign]
    body = yaml.dump(template, Dumper=Dumper, sort_keys=False, width=10_000, allow_unicode=True)
    return HEADER + body


# What a schedule's ${...} stands for when its input is checked (a role ARN must look like one).
SAMPLES = {
    "JobRole.Arn": "arn:aws:iam::123456789012:role/lakehouse-job",
    "AWS::Partition": "aws",
    "AWS::Region": "us-east-1",
}


def check(template: dict[str, Any]) -> None:
    """Every schedule's input checked against StartJobRun's input shape (``contracts``)."""
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::Scheduler::Schedule":
            continue
        target = resource["Properties"]["Target"]
        arn, text = (_sample(target[k]["Fn::Sub"]) for k in ("Arn", "Input"))
        contracts.check_scheduler_target(arn, json.loads(text))


def _sample(text: str) -> str:
    return re.sub(r"\$\{([^}]+)\}", lambda m: SAMPLES.get(m.group(1), m.group(1)), text)
