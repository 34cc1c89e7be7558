"""The part of the rendered template every deployment has (``deployment`` adds the tables):
the parameters, the data bucket, the Glue databases, the job role, the Scheduler's role and
dead-letter queue, and the stream writer (its function, role, failure queue and lag alarm).

IAM statements name their actions and resources; ``"*"`` is a resource only for the actions
IAM gives no resource type (``dynamodb:ListExports``, ``dynamodb:ListStreams``).
tests/aws/test_permissions.py checks every statement against every call the code makes.
"""

from __future__ import annotations

from typing import Any

from ingestion.aws import emr
from ingestion.config import names

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
        "BucketName": text("S3 bucket for exports, stream change files and the Iceberg warehouse (under the prefixes below)."),  # noqa: E501
        CREATE_BUCKET: text("true: the stack creates BucketName. false: BucketName exists already (e.g. the bucket of your exports); the stack sets no lifecycle rule, encryption or policy on it (docs/on-aws.md).", "true") | {"AllowedValues": ["true", "false"]},  # noqa: E501
        KMS_KEY: text("ARN of the customer-managed KMS key that encrypts BucketName, if any: the job role and the stream writer may use it (a bucket the stack creates is encrypted with it). Empty: SSE-S3.", ""),  # noqa: E501
        TOPIC: text("ARN of an SNS topic told of a stream writer behind or failing, a failed scheduled start and a failed job run; its access policy must let events.amazonaws.com publish (docs/on-aws.md). Empty: no notification.", ""),  # noqa: E501
        "CodeBucket": text("Bucket holding the Lambda package and the job's code (make package)."),
        "LambdaCodeKey": text("The stream writer's zip in CodeBucket: its name holds a digest of its content, so a new version is a new key and updates the function (make package prints it).", lambda_key),  # noqa: E501
        "JobEntryPointKey": text("The job's entry point (ingestion/main.py) in CodeBucket.", "dynamodb-lakehouse/main.py"),  # noqa: E501
        "JobArchiveKey": text("The package and the dbt project (ddb-lakehouse emr package) in CodeBucket.", "dynamodb-lakehouse/project.zip"),  # noqa: E501
        "JobDependenciesKey": text("The job's Python packages for the application's architecture (deps-x86_64.tar.gz or deps-arm64.tar.gz) in CodeBucket.", "dynamodb-lakehouse/deps-x86_64.tar.gz"),  # noqa: E501
        "EmrApplicationId": text(f"EMR Serverless application (Spark, {emr.release_label(emr.RECOMMENDED_RELEASE)} or later recommended: the Iceberg line the project is tested on; {emr.release_label(emr.MIN_RELEASE)} at least) that runs the jobs."),  # noqa: E501
        "StreamPrefix": text("Prefix of the stream change files in BucketName.", "streams"),
        "ExportPrefix": text("Prefix of the DynamoDB exports in BucketName (moving from AWS's sample: a prefix other than its exports').", "exports"),  # noqa: E501
        # The job reads both from its environment (LAKEHOUSE_*_DATABASE, set by the schedules).
        STAGING_PARAMETER: database("Glue database of the staging change logs and the merge log.", names.STAGING),  # noqa: E501
        FINAL_PARAMETER: database("Glue database of the final tables Athena queries.", names.FINAL),  # noqa: E501
    }  # fmt: skip


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
        }  # noqa: E501
    }
    for logical, name, what in (
        ("LakehouseDatabase", FINAL_PARAMETER, "Final Iceberg tables (one row per DynamoDB item), queried by Athena."),  # noqa: E501
        ("StagingDatabase", STAGING_PARAMETER, "Staging Iceberg change logs and the merge log."),
    ):  # fmt: skip
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
    ]  # noqa: E501
    return _role("emr-serverless.amazonaws.com", "lakehouse-job", [
        _statement("ListTheBucket", ["s3:ListBucket"], _sub(bucket)),
        # AbortMultipartUpload: an upload the JVM abandons (S3FileIO's, EMRFS's) or an
        # export's; the bucket's lifecycle rule aborts the ones nobody does.
        _statement("ReadWriteTheLakehouse", ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"], _sub(bucket + "/*")),  # noqa: E501
        _statement("ReadTheCode", ["s3:GetObject"], _sub("arn:${AWS::Partition}:s3:::${CodeBucket}/dynamodb-lakehouse/*")),  # noqa: E501
        _statement("GlueCatalog", [f"glue:{a}" for a in glue_actions], [_sub(glue + r) for r in ["catalog", *databases, *tables]]),  # noqa: E501
        _statement("Exports", ["dynamodb:ExportTableToPointInTime"], [{"Ref": a} for a in table_arns]),  # noqa: E501
        # ListExports has no resource type in IAM: it is granted on "*" or not at all.
        _statement("ListExports", ["dynamodb:ListExports"], "*"),
        # DynamoDB writes an export's files as the caller: this on its prefix, beside
        # s3:PutObject and s3:AbortMultipartUpload above.
        _statement("ExportWrites", ["s3:PutObjectAcl"], _sub(bucket + "/${ExportPrefix}/*")),  # noqa: E501
        _statement("DescribeExports", ["dynamodb:DescribeExport"], [_sub("${" + a + "}/export/*") for a in table_arns]),  # noqa: E501
        # sync --from-dynamodb asks whether the chain can continue (point-in-time recovery).
        _statement("RecoveryWindow", ["dynamodb:DescribeContinuousBackups"], [{"Ref": a} for a in table_arns]),  # noqa: E501
        # verify --metrics; PutMetricData has no resource type in IAM: "*" or nothing.
        _statement("VerifyMetrics", ["cloudwatch:PutMetricData"], "*"),
    ])  # fmt: skip


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
    application = "arn:${AWS::Partition}:emr-serverless:${AWS::Region}:${AWS::AccountId}:/applications/${EmrApplicationId}"  # noqa: E501
    role = _role("scheduler.amazonaws.com", "start-lakehouse-jobs", [
        _statement("StartJobs", ["emr-serverless:StartJobRun"], _sub(application)),
        _statement("PassTheJobRole", ["iam:PassRole"], _arn("JobRole")),
        _statement("ReportFailedStarts", ["sqs:SendMessage"], _arn("ScheduleFailures")),
    ])  # fmt: skip
    return {"SchedulerRole": role, "ScheduleFailures": _queue(SCHEDULE_FAILURES)}


def stream_writer(stream_arns: list[str]) -> dict[str, Any]:
    """The Lambda function every stream table's mapping calls (it takes the table from the
    stream's ARN), its role, logs, failure queue and lag alarm."""
    logs = {"LogGroupName": f"/aws/lambda/{FUNCTION}", "RetentionInDays": 14}
    role = _role("lambda.amazonaws.com", "stream-writer", [
        _statement("ReadTheStreams", ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"], [{"Ref": a} for a in stream_arns]),  # noqa: E501
        # ListStreams has no resource type in IAM: it is granted on "*" or not at all.
        _statement("ListStreams", ["dynamodb:ListStreams"], "*"),
        _statement("WriteChangeFiles", ["s3:PutObject"], _sub("arn:${AWS::Partition}:s3:::${BucketName}/${StreamPrefix}/*")),  # noqa: E501
        _statement("Logs", ["logs:CreateLogStream", "logs:PutLogEvents"], _arn("StreamWriterLogs")),  # noqa: E501
        _statement("ReportFailedRecords", ["sqs:SendMessage"], _arn("StreamFailures")),
    ])  # fmt: skip
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


def stream_mapping(stream_arn: str) -> dict[str, Any]:
    """One stream's event source mapping: fewer, bigger change files (one per shard every few
    seconds at most), and a failing batch retried until it is written, with no cap on retries
    or on a record's age (docs/decisions/0010-stream-retries.md): an S3 outage delays the
    changes and loses none while it is shorter than the stream's 24 hours, and the alarms say
    when it is not. The failure queue receives only what Lambda still drops (a record trimmed
    from the stream), and its alarm says so."""
    props = {
        "EventSourceArn": {"Ref": stream_arn},
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
