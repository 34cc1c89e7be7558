"""The CloudFormation template, rendered from the table configuration (``deploy render``).

Every deployment has the parameters, the data bucket, the Glue databases, the job role, the
Scheduler's role and dead-letter queue, and the stream writer (its function, role, failure queue
and lag alarm). Every configured table gets its resources from its entry: its ARN as a
parameter, the job role's export permissions on it, and by its ``cadence`` either a daily
``sync`` from incremental exports and a weekly ``maintain`` (``daily``), or its stream's Lambda
mapping (``stream``); and a ``verify`` against a full export by its ``verify`` (weekly by
default). One long-running ``watch`` serves every stream table (one JVM, one lease per table):
the hot path costs one small always-on job however many hot tables there are.

IAM statements name their actions and resources; ``"*"`` is a resource only for the actions
IAM gives no resource type (``dynamodb:ListExports``, ``dynamodb:ListStreams``).
tests/aws/test_permissions.py checks every statement against every call the code makes.

``deploy/template.yaml`` is this rendering of the shipped configuration (a test compares them):
adding a table never means editing CloudFormation by hand.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ingestion.aws import contracts, emr, packaging
from ingestion.config import names
from ingestion.dynamodb.tables import TableConfig, TableConfigError

FUNCTION = "dynamodb-lakehouse-stream-writer"
STREAM_FAILURES = "dynamodb-lakehouse-stream-failures"
SCHEDULE_FAILURES = "dynamodb-lakehouse-schedule-failures"
FOURTEEN_DAYS = 1209600
CREATE_BUCKET, KMS_KEY, TOPIC = "CreateBucket", "BucketKmsKeyArn", "NotificationTopicArn"
CREATES_BUCKET, HAS_KMS_KEY, NOTIFIES = "CreatesBucket", "HasKmsKey", "Notifies"
STAGING_PARAMETER = "StagingDatabaseName"
FINAL_PARAMETER = "FinalDatabaseName"
# The job's databases, as the template's parameters (emr.job_environment).
DATABASES = ("${" + STAGING_PARAMETER + "}", "${" + FINAL_PARAMETER + "}")


def _sub(text: str) -> dict[str, str]:
    return {"Fn::Sub": text}


def _arn(name: str) -> dict[str, list[str]]:
    return {"Fn::GetAtt": [name, "Arn"]}


def _statement(sid: str, actions: list[str], resource: Any) -> dict[str, Any]:
    return {"Sid": sid, "Effect": "Allow", "Action": actions, "Resource": resource}


def _role(service: str, policy: str, statements: list[dict[str, Any]]) -> dict[str, Any]:
    trust = {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}
    return {
        "Type": "AWS::IAM::Role",
        "Properties": {
            "AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": [trust]},
            "Policies": [
                {
                    "PolicyName": policy,
                    "PolicyDocument": {"Version": "2012-10-17", "Statement": statements},
                }
            ],
        },
    }


def _queue(name: str) -> dict[str, Any]:
    props = {"QueueName": name, "MessageRetentionPeriod": FOURTEEN_DAYS}
    return {"Type": "AWS::SQS::Queue", "Properties": props}


def parameters(lambda_key: str) -> dict[str, Any]:
    """The template's parameters; ``lambda_key`` is the stream writer's zip's key
    (``packaging.lambda_key``)."""

    def text(description: str, default: str | None = None) -> dict[str, str]:
        found = {"Type": "String", "Description": description}
        return found | ({"Default": default} if default is not None else {})

    def database(description: str, default: str) -> dict[str, str]:
        pattern = {
            "AllowedPattern": names.DATABASE_NAME.pattern,
            "ConstraintDescription": "lower-case letters, digits and underscores",
        }
        return text(description, default) | pattern

    return {
        "BucketName": text(
            "S3 bucket for exports, stream change files and the Iceberg warehouse (under the "
            "prefixes below)."
        ),
        CREATE_BUCKET: text(
            "true: the stack creates BucketName. false: BucketName exists already (e.g. the bucket "
            "of your exports); the stack sets no lifecycle rule, encryption or policy on it "
            "(docs/on-aws.md).",
            "true",
        )
        | {"AllowedValues": ["true", "false"]},
        KMS_KEY: text(
            "ARN of the customer-managed KMS key that encrypts BucketName, if any: the job role "
            "and the stream writer may use it (a bucket the stack creates is encrypted with it). "
            "Empty: SSE-S3.",
            "",
        ),
        TOPIC: text(
            "ARN of an SNS topic told of a stream writer behind or failing, a failed scheduled "
            "start and a failed job run; its access policy must let events.amazonaws.com publish "
            "(docs/on-aws.md). Empty: no notification.",
            "",
        ),
        "CodeBucket": text("Bucket holding the Lambda package and the job's code (make package)."),
        "LambdaCodeKey": text(
            "The stream writer's zip in CodeBucket: its name holds a digest of its content, so a "
            "new version is a new key and updates the function (make package prints it).",
            lambda_key,
        ),
        "JobEntryPointKey": text(
            "The job's entry point (ingestion/main.py) in CodeBucket.", "dynamodb-lakehouse/main.py"
        ),
        "JobArchiveKey": text(
            "The package and the dbt project (ddb-lakehouse emr package) in CodeBucket.",
            "dynamodb-lakehouse/project.zip",
        ),
        "JobDecoderKey": text(
            "Staging's decoder (dynamodb-lakehouse-decoder.jar, built by make package beside "
            "project.zip) in CodeBucket.",
            "dynamodb-lakehouse/dynamodb-lakehouse-decoder.jar",
        ),
        "JobDependenciesKey": text(
            "The job's Python packages for the application's architecture (deps-x86_64.tar.gz or "
            "deps-arm64.tar.gz) in CodeBucket.",
            "dynamodb-lakehouse/deps-x86_64.tar.gz",
        ),
        "EmrApplicationId": text(
            f"EMR Serverless application (Spark, {emr.release_label(emr.RECOMMENDED_RELEASE)} or "
            f"later recommended: the Iceberg line the project is tested on; "
            f"{emr.release_label(emr.MIN_RELEASE)} at least) that runs the jobs."
        ),
        "StreamPrefix": text("Prefix of the stream change files in BucketName.", "streams"),
        "ExportPrefix": text(
            "Prefix of the DynamoDB exports in BucketName (moving from AWS's sample: a prefix "
            "other than its exports').",
            "exports",
        ),
        # The job reads both from its environment (LAKEHOUSE_*_DATABASE, set by the schedules).
        STAGING_PARAMETER: database(
            "Glue database of the staging change logs and the merge log.", names.STAGING
        ),
        FINAL_PARAMETER: database("Glue database of the final tables Athena queries.", names.FINAL),
    }


def conditions() -> dict[str, Any]:
    """The template's conditions: whether it creates the bucket, knows its KMS key, notifies."""

    def given(parameter: str) -> dict[str, Any]:
        return {"Fn::Not": [{"Fn::Equals": [{"Ref": parameter}, ""]}]}

    return {
        CREATES_BUCKET: {"Fn::Equals": [{"Ref": CREATE_BUCKET}, "true"]},
        HAS_KMS_KEY: given(KMS_KEY),
        NOTIFIES: given(TOPIC),
    }


def _when(condition: str, value: Any) -> dict[str, Any]:
    """``value`` when ``condition`` holds, else no value at all."""
    return {"Fn::If": [condition, value, {"Ref": "AWS::NoValue"}]}


def _notify() -> dict[str, Any]:
    """An alarm's actions: the notification topic, when one is given."""
    return _when(NOTIFIES, [{"Ref": TOPIC}])


def _queue_alarm(queue: str, what: str) -> dict[str, Any]:
    """An alarm on a dead-letter queue holding anything at all."""
    props = {
        "AlarmDescription": what,
        "Namespace": "AWS/SQS",
        "MetricName": "ApproximateNumberOfMessagesVisible",
        "Dimensions": [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}],
        "Statistic": "Maximum",
        "Period": 300,
        "EvaluationPeriods": 1,
        "Threshold": 0,
        "ComparisonOperator": "GreaterThanThreshold",
        "TreatMissingData": "notBreaching",
        "AlarmActions": _notify(),
    }
    return {"Type": "AWS::CloudWatch::Alarm", "Properties": props}


def notifications() -> dict[str, Any]:
    """What tells the topic: a scheduled start that failed for good (its queue's alarm), and
    every failed job run of the application (an EventBridge rule; the topic's policy must let
    EventBridge publish)."""
    rule = {
        "Description": "A failed job run of the lakehouse's EMR Serverless application, to the "
        "notification topic.",
        "EventPattern": {
            "source": ["aws.emr-serverless"],
            "detail-type": ["EMR Serverless Job Run State Change"],
            "detail": {"state": ["FAILED"], "applicationId": [{"Ref": "EmrApplicationId"}]},
        },
        "Targets": [{"Arn": {"Ref": TOPIC}, "Id": "notification-topic"}],
    }
    return {
        "ScheduleFailuresAlarm": _queue_alarm(
            "ScheduleFailures",
            "A scheduled job run could not be started after its retries: its error is the "
            "message in the schedule failures queue.",
        ),
        "FailedJobRuns": {"Type": "AWS::Events::Rule", "Condition": NOTIFIES, "Properties": rule},
    }


def bucket_and_catalog() -> dict[str, Any]:
    """The data bucket (unless ``CreateBucket`` is false: the user's own) and both databases.
    A bucket the stack creates expires old exports and aborts multipart uploads left
    incomplete (a killed job's, an export's): their parts are billed until then."""
    kms = {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": {"Ref": KMS_KEY}}
    encryption = {"Fn::If": [HAS_KMS_KEY, kms, {"SSEAlgorithm": "AES256"}]}
    bucket = {
        "BucketName": {"Ref": "BucketName"},
        "BucketEncryption": {
            "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": encryption}]
        },
        "PublicAccessBlockConfiguration": {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        },
        "LifecycleConfiguration": {
            "Rules": [
                {
                    "Id": "expire-old-exports",
                    "Status": "Enabled",
                    "Prefix": _sub("${ExportPrefix}/"),
                    "ExpirationInDays": 30,
                },
                {
                    "Id": "abort-incomplete-uploads",
                    "Status": "Enabled",
                    "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7},
                },
            ]
        },
    }
    # Kept when the stack is deleted or stops creating it (CreateBucket changed to false): it
    # holds the exports and the warehouse.
    kept = {"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"}
    found: dict[str, Any] = {
        "DataBucket": {
            "Type": "AWS::S3::Bucket",
            "Condition": CREATES_BUCKET,
            **kept,
            "Properties": bucket,
        }
    }
    for logical, name, what in (
        (
            "LakehouseDatabase",
            FINAL_PARAMETER,
            "Final Iceberg tables (one row per DynamoDB item), queried by Athena.",
        ),
        ("StagingDatabase", STAGING_PARAMETER, "Staging Iceberg change logs and the merge log."),
    ):
        database = {"Name": {"Ref": name}, "Description": what}
        props = {"CatalogId": {"Ref": "AWS::AccountId"}, "DatabaseInput": database}
        found[logical] = {"Type": "AWS::Glue::Database", "Properties": props}
    return found


def job_role(table_arns: list[str]) -> dict[str, Any]:
    """The job's role: the bucket, the code, the Glue databases, and the tables' exports."""
    glue = "arn:${AWS::Partition}:glue:${AWS::Region}:${AWS::AccountId}:"
    staging, final = DATABASES
    databases = [f"database/{final}", f"database/{staging}"]
    tables = [f"table/{final}/*", f"table/{staging}/*"]
    bucket = "arn:${AWS::Partition}:s3:::${BucketName}"
    glue_actions = [
        "GetDatabase",
        "GetDatabases",
        "GetTable",
        "GetTables",
        "CreateTable",
        "UpdateTable",
        "DeleteTable",
    ]
    return _role(
        "emr-serverless.amazonaws.com",
        "lakehouse-job",
        [
            _statement("ListTheBucket", ["s3:ListBucket"], _sub(bucket)),
            # AbortMultipartUpload: an upload the JVM abandons (S3FileIO's, EMRFS's) or an
            # export's; the bucket's lifecycle rule aborts the ones nobody does.
            _statement(
                "ReadWriteTheLakehouse",
                ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
                _sub(bucket + "/*"),
            ),
            _statement(
                "ReadTheCode",
                ["s3:GetObject"],
                _sub("arn:${AWS::Partition}:s3:::${CodeBucket}/dynamodb-lakehouse/*"),
            ),
            _statement(
                "GlueCatalog",
                [f"glue:{a}" for a in glue_actions],
                [_sub(glue + r) for r in ["catalog", *databases, *tables]],
            ),
            _statement(
                "Exports", ["dynamodb:ExportTableToPointInTime"], [{"Ref": a} for a in table_arns]
            ),
            # ListExports has no resource type in IAM: it is granted on "*" or not at all.
            _statement("ListExports", ["dynamodb:ListExports"], "*"),
            # DynamoDB writes an export's files as the caller: this on its prefix, beside
            # s3:PutObject and s3:AbortMultipartUpload above.
            _statement("ExportWrites", ["s3:PutObjectAcl"], _sub(bucket + "/${ExportPrefix}/*")),
            _statement(
                "DescribeExports",
                ["dynamodb:DescribeExport"],
                [_sub("${" + a + "}/export/*") for a in table_arns],
            ),
            # sync --from-dynamodb asks whether the chain can continue (point-in-time recovery).
            _statement(
                "RecoveryWindow",
                ["dynamodb:DescribeContinuousBackups"],
                [{"Ref": a} for a in table_arns],
            ),
            # verify --metrics; PutMetricData has no resource type in IAM: "*" or nothing.
            _statement("VerifyMetrics", ["cloudwatch:PutMetricData"], "*"),
        ],
    )


def key_access(role: str, actions: list[str]) -> dict[str, Any]:
    """The bucket's KMS key for ``role``, when the template is given one: a policy of its own,
    so that no role's statement is conditional. The job role reads and writes what the key
    encrypts (``kms:Decrypt``, ``kms:GenerateDataKey``); the stream writer only writes."""
    statement = _statement("UseTheBucketKey", actions, {"Ref": KMS_KEY})
    props = {
        "PolicyName": "lakehouse-bucket-key",
        "Roles": [{"Ref": role}],
        "PolicyDocument": {"Version": "2012-10-17", "Statement": [statement]},
    }
    return {"Type": "AWS::IAM::Policy", "Condition": HAS_KMS_KEY, "Properties": props}


READ_WRITE_KEY = ["kms:Decrypt", "kms:GenerateDataKey"]
WRITE_KEY = ["kms:GenerateDataKey"]


def scheduling() -> dict[str, Any]:
    """The Scheduler's role (start the jobs, pass the job role, report failed starts) and the
    queue a start that still fails after its retries lands in."""
    application = (
        "arn:${AWS::Partition}:emr-serverless:${AWS::Region}:${AWS::AccountId}"
        ":/applications/${EmrApplicationId}"
    )
    role = _role(
        "scheduler.amazonaws.com",
        "start-lakehouse-jobs",
        [
            _statement("StartJobs", ["emr-serverless:StartJobRun"], _sub(application)),
            _statement("PassTheJobRole", ["iam:PassRole"], _arn("JobRole")),
            _statement("ReportFailedStarts", ["sqs:SendMessage"], _arn("ScheduleFailures")),
        ],
    )
    return {"SchedulerRole": role, "ScheduleFailures": _queue(SCHEDULE_FAILURES)}


def stream_writer(stream_arns: list[str]) -> dict[str, Any]:
    """The Lambda function every stream table's mapping calls (it takes the table from the
    stream's ARN), its role, logs, failure queue and lag alarm."""
    logs = {"LogGroupName": f"/aws/lambda/{FUNCTION}", "RetentionInDays": 14}
    role = _role(
        "lambda.amazonaws.com",
        "stream-writer",
        [
            _statement(
                "ReadTheStreams",
                ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"],
                [{"Ref": a} for a in stream_arns],
            ),
            # ListStreams has no resource type in IAM: it is granted on "*" or not at all.
            _statement("ListStreams", ["dynamodb:ListStreams"], "*"),
            _statement(
                "WriteChangeFiles",
                ["s3:PutObject"],
                _sub("arn:${AWS::Partition}:s3:::${BucketName}/${StreamPrefix}/*"),
            ),
            _statement(
                "Logs", ["logs:CreateLogStream", "logs:PutLogEvents"], _arn("StreamWriterLogs")
            ),
            _statement("ReportFailedRecords", ["sqs:SendMessage"], _arn("StreamFailures")),
        ],
    )
    function = {
        "FunctionName": FUNCTION,
        "Runtime": "python3.11",
        "Handler": "ingestion.stream_writer.handler",
        "Code": {"S3Bucket": {"Ref": "CodeBucket"}, "S3Key": {"Ref": "LambdaCodeKey"}},
        "Role": _arn("StreamWriterRole"),
        "Timeout": 60,
        "MemorySize": 256,
        "LoggingConfig": {"LogGroup": {"Ref": "StreamWriterLogs"}},
        "Environment": {
            "Variables": {"LAKEHOUSE_STREAM_URI": _sub("s3://${BucketName}/${StreamPrefix}")}
        },
    }
    alarm = {
        "AlarmDescription": "The stream writer is more than a minute behind a stream (failing, "
        "or throttled): change files, and so the final tables, are late.",
        "Namespace": "AWS/Lambda",
        "MetricName": "IteratorAge",
        "Dimensions": [{"Name": "FunctionName", "Value": {"Ref": "StreamWriterFunction"}}],
        "Statistic": "Maximum",
        "Period": 60,
        "EvaluationPeriods": 5,
        "Threshold": 60000,
        "ComparisonOperator": "GreaterThanThreshold",
        "TreatMissingData": "notBreaching",
        "AlarmActions": _notify(),
    }
    # The mapping retries a failing batch until it is written (stream_mapping); the stream
    # keeps a record 24 hours, so past this age the oldest records are hours from being lost.
    at_risk = alarm | {
        "AlarmDescription": "The stream writer has not written for 12 hours: the stream "
        "keeps a record 24 hours, after which its change is lost to the lakehouse until "
        "verify --from-dynamodb --repair heals the table. Fix the writer (its log group).",
        "EvaluationPeriods": 1,
        "Period": 300,
        "Threshold": AT_RISK_MS,
    }
    return {
        "StreamWriterLogs": {"Type": "AWS::Logs::LogGroup", "Properties": logs},
        "StreamWriterRole": role,
        "StreamWriterFunction": {"Type": "AWS::Lambda::Function", "Properties": function},
        "StreamFailures": _queue(STREAM_FAILURES),
        "StreamBehindAlarm": {"Type": "AWS::CloudWatch::Alarm", "Properties": alarm},
        "StreamAtRiskAlarm": {"Type": "AWS::CloudWatch::Alarm", "Properties": at_risk},
        "StreamFailuresAlarm": _queue_alarm(
            "StreamFailures",
            "Lambda dropped stream records (their metadata is the message): the lakehouse "
            "lacks those changes until verify --from-dynamodb --repair heals the table.",
        ),
    }


AT_RISK_MS = 12 * 3600 * 1000  # half the stream's 24-hour retention


RETRY_FOREVER = -1  # Lambda's "no limit" for a stream mapping's retries and record age


def stream_mapping(arn: str) -> dict[str, Any]:
    """One stream's event source mapping: fewer, bigger change files (one per shard every few
    seconds at most), and a failing batch retried until it is written, with no cap on retries
    or on a record's age (docs/decisions/0010-stream-retries.md): an S3 outage delays the
    changes and loses none while it is shorter than the stream's 24 hours, and the alarms say
    when it is not. The failure queue receives only what Lambda still drops (a record trimmed
    from the stream), and its alarm says so."""
    props = {
        "EventSourceArn": {"Ref": arn},
        "FunctionName": {"Ref": "StreamWriterFunction"},
        "StartingPosition": "TRIM_HORIZON",
        "BatchSize": 1000,
        "MaximumBatchingWindowInSeconds": 5,
        "FunctionResponseTypes": ["ReportBatchItemFailures"],
        "BisectBatchOnFunctionError": True,
        "MaximumRetryAttempts": RETRY_FOREVER,
        "MaximumRecordAgeInSeconds": RETRY_FOREVER,
        "DestinationConfig": {"OnFailure": {"Destination": _arn("StreamFailures")}},
    }
    return {"Type": "AWS::Lambda::EventSourceMapping", "Properties": props}


def outputs(streamed: bool) -> dict[str, Any]:
    found: dict[str, Any] = {"JobRoleArn": {"Value": _arn("JobRole")}}
    if streamed:
        found["StreamWriterFunctionArn"] = {"Value": _arn("StreamWriterFunction")}
        found["StreamLocation"] = {"Value": _sub("s3://${BucketName}/${StreamPrefix}")}
    return found


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
    template_parameters = parameters(packaging.lambda_key())
    for table in tables:
        template_parameters[table_arn(table)] = {
            "Type": "String",
            "Description": f"ARN of the DynamoDB table {table.dynamodb_name} "
            "(point-in-time recovery on).",
        }
    for table in streamed:
        template_parameters[stream_arn(table)] = {
            "Type": "String",
            "Description": f"ARN of the {table.dynamodb_name} table's stream "
            "(view type NEW_AND_OLD_IMAGES).",
        }
    resources = bucket_and_catalog()
    resources["JobRole"] = job_role([table_arn(t) for t in tables])
    resources.update(scheduling())
    resources.update(notifications())
    if streamed:
        resources.update(stream_writer([stream_arn(t) for t in streamed]))
        for table in streamed:
            resources[f"{camel(table.name)}StreamMapping"] = stream_mapping(stream_arn(table))
        resources["Watch"] = _watch(streamed)
    resources["JobKeyAccess"] = key_access("JobRole", READ_WRITE_KEY)
    if streamed:
        resources["StreamWriterKeyAccess"] = key_access("StreamWriterRole", WRITE_KEY)
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
        "Parameters": template_parameters,
        "Conditions": conditions(),
        "Resources": resources,
        "Outputs": outputs(bool(streamed)),
    }


def _parameters(watch: bool) -> str:
    code = ("s3://${CodeBucket}/${JobArchiveKey}", "s3://${BucketName}/warehouse")
    deps = "s3://${CodeBucket}/${JobDependenciesKey}"
    decoder = "s3://${CodeBucket}/${JobDecoderKey}"
    return emr.spark_parameters(
        *code, deps, watch=watch, databases=DATABASES, region="${AWS::Region}", decoder=decoder
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


def _schedule(
    description: str, expression: str, name: str, arguments: list[str], watch: bool = False
) -> dict[str, Any]:
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
    return [
        "--table-arn",
        "${" + table_arn(table) + "}",
        "--to",
        "s3://${BucketName}/${ExportPrefix}",
    ]


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
