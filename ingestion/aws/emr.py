"""Run a ``ddb-lakehouse`` command on Amazon EMR: package the project, upload it, submit, wait.

The package is one zip (the ``ingestion`` package and the dbt project: ``dbt_project.yml``,
``models/``, ``macros/``, ``profiles/``, ``schemas/``, ``conf/``) plus the entry point
``ingestion/main.py``. On EMR Serverless the zip is unpacked next to the driver
(``spark.archives ...#project``) and the job runs with ``LAKEHOUSE_TARGET=emr`` (Glue catalog,
S3 warehouse, EMR's Iceberg). The Python packages the job imports (dbt-core, dbt-spark, PyYAML)
must be in the job's Python: a custom image, or a packed virtualenv given as ``--venv-archive``
(README, "On AWS").
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingestion.config import settings

log = logging.getLogger(__name__)

PROJECT_PARTS = ("ingestion", "models", "macros", "profiles", "schemas", "conf")
PROJECT_FILES = ("dbt_project.yml",)
LAMBDA_HANDLER = "ingestion.stream_writer.handler"
LAMBDA_FILES = (
    "ingestion/__init__.py",
    "ingestion/stream_writer.py",
    "ingestion/sources/__init__.py",
    "ingestion/sources/s3_uri.py",
    "ingestion/sources/stream_writer.py",
)
DONE_SERVERLESS = {"SUCCESS"}
FAILED_SERVERLESS = {"FAILED", "CANCELLED"}
DONE_STEP = {"COMPLETED"}
FAILED_STEP = {"FAILED", "CANCELLED", "INTERRUPTED"}


class EmrError(RuntimeError):
    """A job could not be submitted, or it failed."""


@dataclass(frozen=True)
class Package:
    archive: Path  # project.zip
    entry_point: Path  # ingestion/main.py
    digest: str  # of the archive: names the upload, so a changed project never reuses an old one


def package(out: Path, root: Path | None = None) -> Package:
    """Zip the package and the dbt project (sorted, fixed timestamps: same files, same zip)."""
    root = root or settings.project_dir()
    out.mkdir(parents=True, exist_ok=True)
    archive = out / "project.zip"
    files = [root / name for name in PROJECT_FILES]
    for part in PROJECT_PARTS:
        files += [
            p for p in (root / part).rglob("*") if p.is_file() and "__pycache__" not in p.parts
        ]
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for path in sorted(files):
            info = zipfile.ZipInfo(
                path.relative_to(root).as_posix(), date_time=(2020, 1, 1, 0, 0, 0)
            )
            info.external_attr = 0o644 << 16
            bundle.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()[:16]
    return Package(archive, root / "ingestion" / "main.py", digest)


def package_lambda(out: Path, root: Path | None = None) -> Path:
    """The Lambda function's code: the writer, the S3 URI parser and the handler's stable path
    (``ingestion.stream_writer.handler``) only: standard library + boto3, which the Lambda
    runtime provides."""
    root = root or settings.project_dir()
    out.mkdir(parents=True, exist_ok=True)
    archive = out / "stream_writer.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name in LAMBDA_FILES:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            bundle.writestr(info, (root / name).read_bytes(), zipfile.ZIP_DEFLATED)
    return archive


def code_locations(built: Package, bucket: str, prefix: str) -> tuple[str, str]:
    """Where the package goes: (entry point URI, archive URI) under ``prefix/<digest>/``."""
    base = f"s3://{bucket}/{prefix.strip('/')}/{built.digest}"
    return f"{base}/main.py", f"{base}/project.zip"


def upload(s3: Any, built: Package, bucket: str, prefix: str) -> tuple[str, str]:
    """Upload the package under ``prefix/<digest>/``; return (entry point URI, archive URI)."""
    entry, archive = code_locations(built, bucket, prefix)
    s3.upload_file(str(built.archive), bucket, archive.split("/", 3)[3])
    s3.upload_file(str(built.entry_point), bucket, entry.split("/", 3)[3])
    return entry, archive


# The oldest EMR release whose Iceberg (1.7) has what `maintain` calls: rewrite_data_files'
# remove-dangling-deletes. Tested locally with Iceberg 1.10.2 (snowpark-connect-deps-iceberg).
MIN_RELEASE = (7, 7, 0)


def check_release(client: Any, application_id: str) -> str:
    """The application's release label, or an error when it is older than ``MIN_RELEASE``."""
    label = str(client.get_application(applicationId=application_id)["application"]["releaseLabel"])
    numbers = tuple(int(n) for n in re.findall(r"\d+", label)[:3])
    if not label.startswith("emr-") or numbers < MIN_RELEASE:
        minimum = "emr-" + ".".join(map(str, MIN_RELEASE))
        raise EmrError(
            f"application {application_id} runs {label}; this project needs {minimum} or later "
            "(Iceberg 1.7 or later, for maintain's remove-dangling-deletes): create an "
            f"application with release {minimum} or later"
        )
    return label


def job_environment(warehouse: str) -> dict[str, str]:
    """The environment the job's driver needs (the target, the warehouse, the project)."""
    return {
        "LAKEHOUSE_TARGET": "emr",
        "LAKEHOUSE_WAREHOUSE": warehouse,
        "LAKEHOUSE_PROJECT_DIR": "./project",
        "PYTHONPATH": "./project",
    }


# EMR 7.x ships Iceberg's Spark runtime here. It must be a spark-submit parameter: a jar set
# through SparkSession.builder (the emr profile's spark.jars) is not loaded under spark-submit.
EMR_ICEBERG_JAR = "/usr/share/aws/iceberg/lib/iceberg-spark3-runtime.jar"


def spark_parameters(archive: str, warehouse: str, venv_archive: str | None = None) -> str:
    """spark-submit parameters of an EMR Serverless job of this project: the one list that
    ``emr submit`` sends and the template's schedules carry (a test compares them)."""
    env = job_environment(warehouse)
    archives = [f"{archive}#project"] + ([f"{venv_archive}#environment"] if venv_archive else [])
    parts = [f"--conf spark.jars={EMR_ICEBERG_JAR}", f"--conf spark.archives={','.join(archives)}"]
    if venv_archive:
        env["PYSPARK_PYTHON"] = "./environment/bin/python"
        env["PYSPARK_DRIVER_PYTHON"] = "./environment/bin/python"
        parts.append("--conf spark.executorEnv.PYSPARK_PYTHON=./environment/bin/python")
    parts += [f"--conf spark.emr-serverless.driverEnv.{k}={v}" for k, v in env.items()]
    return " ".join(parts)


def start_serverless(
    client: Any,
    application_id: str,
    role_arn: str,
    entry_point: str,
    arguments: list[str],
    parameters: str,
    name: str,
    token: str | None = None,
) -> str:
    """Start one job run. ``token`` (``clientToken``) is fresh for every intended run: a token
    derived from the command repeated tomorrow's identical ``sync``, and EMR Serverless answered
    with yesterday's run instead of starting one. boto3's own retries of this one call reuse it."""
    request = job_run_request(
        application_id, role_arn, entry_point, arguments, parameters, name, token
    )
    return str(client.start_job_run(**request)["jobRunId"])


def job_run_request(
    application_id: str,
    role_arn: str,
    entry_point: str,
    arguments: list[str],
    parameters: str,
    name: str,
    token: str | None = None,
) -> dict[str, Any]:
    """The StartJobRun request of one run (``emr submit --dry-run`` prints it)."""
    return {
        "applicationId": application_id,
        "executionRoleArn": role_arn,
        "name": name,
        "clientToken": (token or uuid.uuid4().hex)[:64],
        "jobDriver": {
            "sparkSubmit": {
                "entryPoint": entry_point,
                "entryPointArguments": arguments,
                "sparkSubmitParameters": parameters,
            }
        },
    }


def add_step(
    client: Any,
    cluster_id: str,
    entry_point: str,
    arguments: list[str],
    archive: str,
    name: str,
    warehouse: str,
) -> str:
    """A step on an EMR on EC2 cluster: spark-submit through command-runner.jar, in cluster
    mode: the driver runs in YARN's application master, where ``spark.yarn.appMasterEnv.*``
    sets its environment and the archive is unpacked (in client mode the driver ran on the
    primary node without either, and LAKEHOUSE_TARGET never reached it)."""
    step = step_request(entry_point, arguments, archive, name, warehouse)
    answer = client.add_job_flow_steps(JobFlowId=cluster_id, Steps=[step])
    return str(answer["StepIds"][0])


def step_request(
    entry_point: str, arguments: list[str], archive: str, name: str, warehouse: str
) -> dict[str, Any]:
    """One EMR on EC2 step (``emr submit --dry-run`` prints it)."""
    command = ["spark-submit", "--deploy-mode", "cluster"]
    command += ["--conf", f"spark.archives={archive}#project"]
    for key, value in job_environment(warehouse).items():
        command += ["--conf", f"spark.yarn.appMasterEnv.{key}={value}"]
        command += ["--conf", f"spark.executorEnv.{key}={value}"]
    return {
        "Name": name,
        "ActionOnFailure": "CONTINUE",
        "HadoopJarStep": {"Jar": "command-runner.jar", "Args": [*command, entry_point, *arguments]},
    }


def wait(
    state: Callable[[], tuple[str, str]],
    done: set[str],
    failed: set[str],
    what: str,
    poll_seconds: float = 30.0,
    report: Callable[[str], Any] = print,
) -> str:
    """Poll ``state()`` -> (state, detail) until it is done (returned) or failed (raised)."""
    started = time.monotonic()
    while True:
        current, detail = state()
        elapsed = time.monotonic() - started
        if current in done:
            report(f"{what}: {current} after {elapsed:.0f}s")
            return current
        if current in failed:
            raise EmrError(f"{what}: {current} after {elapsed:.0f}s: {detail or 'no detail'}")
        report(f"{what}: {current}, {elapsed:.0f}s so far")
        time.sleep(poll_seconds)


def serverless_state(
    client: Any, application_id: str, run_id: str
) -> Callable[[], tuple[str, str]]:
    def state() -> tuple[str, str]:
        run = client.get_job_run(applicationId=application_id, jobRunId=run_id)["jobRun"]
        return str(run["state"]), str(run.get("stateDetails") or "")

    return state


def step_state(client: Any, cluster_id: str, step_id: str) -> Callable[[], tuple[str, str]]:
    def state() -> tuple[str, str]:
        status = client.describe_step(ClusterId=cluster_id, StepId=step_id)["Step"]["Status"]
        reason = (status.get("FailureDetails") or {}).get("Reason") or status.get(
            "StateChangeReason", {}
        ).get("Message", "")
        return str(status["State"]), str(reason or "")

    return state
