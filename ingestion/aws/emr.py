"""Run a ``ddb-lakehouse`` command on Amazon EMR: submit what ``packaging`` built, wait.

On EMR Serverless the project zip and the dependency archive are unpacked next to the driver
and next to every executor (``spark.archives ...#project,...#deps``); the job runs the release's
Python 3.11 with both on ``PYTHONPATH`` and ``LAKEHOUSE_TARGET=emr`` (Glue catalog, S3
warehouse, EMR's Iceberg jar given to spark-submit). ``spark_parameters`` is the one list of
those settings: ``emr submit`` sends it and the template's schedules carry it (a test compares
them; docs/on-aws.md shows it).

The driver's environment is ``spark.emr-serverless.driverEnv.*``; the executors take only
``spark.executorEnv.*`` (EMR Serverless's job properties), so every variable goes to both: the
Python a job runs on its executors (verify's second pass) imports the project and reads the
same settings as the driver's. The region goes to both as ``AWS_REGION``: EMR injects none, and
a client built without one would depend on what the SDK's default chain finds in a private
subnet.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from typing import Any

from ingestion.aws import job_python
from ingestion.config import names, polling
from ingestion.config.errors import LakehouseError
from ingestion.spark.jars import DECODER_JAR

log = logging.getLogger(__name__)

DONE_SERVERLESS = {"SUCCESS"}
FAILED_SERVERLESS = {"FAILED", "CANCELLED"}
DONE_STEP = {"COMPLETED"}
FAILED_STEP = {"FAILED", "CANCELLED", "INTERRUPTED"}


class EmrError(LakehouseError):
    """A job could not be submitted, or it failed."""


# The oldest EMR release whose Iceberg (1.7) has what `maintain` calls: rewrite_data_files'
# remove-dangling-deletes. Tested locally with Iceberg 1.10.2 (snowpark-connect-deps-iceberg),
# the line EMR ships from emr-7.12.0 (7.7 to 7.9 ship 1.7.1): recommended, not required.
MIN_RELEASE = (7, 7, 0)
RECOMMENDED_RELEASE = (7, 12, 0)


def release_numbers(label: str) -> tuple[int, ...]:
    """``emr-7.12.0`` -> (7, 12, 0)."""
    return tuple(int(n) for n in re.findall(r"\d+", label)[:3])


def release_label(numbers: tuple[int, ...]) -> str:
    """(7, 12, 0) -> ``emr-7.12.0``."""
    return "emr-" + ".".join(map(str, numbers))


def release_note(label: str) -> str:
    """What ``doctor`` and ``emr submit`` add about a release older than the recommended one."""
    if release_numbers(label) >= RECOMMENDED_RELEASE:
        return ""
    wanted = release_label(RECOMMENDED_RELEASE)
    return (
        f" (runs; the project is tested on the Iceberg line of {wanted} and later: an "
        "application on it is recommended)"
    )


def check_release(client: Any, application_id: str) -> tuple[str, str]:
    """The application's (release label, architecture), or an error when the release is older
    than ``MIN_RELEASE``. The architecture (``x86_64`` or ``arm64``) picks the dependency
    archive."""
    application = client.get_application(applicationId=application_id)["application"]
    label = str(application["releaseLabel"])
    if not label.startswith("emr-") or release_numbers(label) < MIN_RELEASE:
        minimum = release_label(MIN_RELEASE)
        raise EmrError(
            f"application {application_id} runs {label}; this project needs {minimum} or later "
            "(Iceberg 1.7 or later, for maintain's remove-dangling-deletes): create an "
            f"application with release {minimum} or later"
        )
    return label, str(application.get("architecture") or "X86_64").lower()


# The Glue databases of a job: this process's (``emr submit``), or the template's parameters.
DATABASES = (names.STAGING, names.FINAL)


def job_environment(
    warehouse: str, region: str, databases: tuple[str, str] = DATABASES
) -> dict[str, str]:
    """The environment the job's driver and executors need (the target, the warehouse, the
    project, the region, the staging and final databases)."""
    return {
        "AWS_REGION": region,
        "LAKEHOUSE_TARGET": "emr",
        "LAKEHOUSE_WAREHOUSE": warehouse,
        "LAKEHOUSE_PROJECT_DIR": "./project",
        "PYTHONPATH": "./project",
        names.STAGING_VARIABLE: databases[0],
        names.FINAL_VARIABLE: databases[1],
    }


# EMR 7.x ships Iceberg's Spark runtime here. It must be a spark-submit parameter: a jar set
# through SparkSession.builder (the emr profile's spark.jars) is not loaded under spark-submit.
EMR_ICEBERG_JAR = "/usr/share/aws/iceberg/lib/iceberg-spark3-runtime.jar"


def decoder_location(archive: str) -> str:
    """Where the decoder's jar (decision 0013) is uploaded: beside the job's archive, under the
    same content digest (``packaging.upload``)."""
    return f"{archive.rsplit('/', 1)[0]}/{DECODER_JAR}"


def jars(archive: str, decoder: str | None = None) -> str:
    """``spark.jars`` of a job: EMR's Iceberg runtime and the project's decoder (``decoder``:
    its URI; None: beside ``archive``)."""
    return f"{EMR_ICEBERG_JAR},{decoder or decoder_location(archive)}"


# A watch runs for days on small batches: one 1-vCPU driver and one 1-vCPU executor (4 GB
# workers once EMR adds its memory overhead) instead of EMR Serverless's defaults (4-vCPU
# workers, dynamic allocation). docs/on-aws.md prices it.
WATCH_SIZE = (
    "spark.driver.cores=1",
    "spark.driver.memory=3g",
    "spark.executor.cores=1",
    "spark.executor.memory=3g",
    "spark.dynamicAllocation.enabled=false",
    "spark.executor.instances=1",
)


def job_setup(
    archive: str,
    warehouse: str,
    region: str,
    deps_archive: str | None = None,
    venv_archive: str | None = None,
    databases: tuple[str, str] = DATABASES,
) -> tuple[dict[str, str], list[str]]:
    """The job's environment (driver and executors alike) and the archives (``uri#alias``) of
    one job run, on EMR Serverless and on EMR on EC2 alike. The job's Python is the release's
    3.11 with ``deps_archive`` on its path; or, with neither archive, the same Python in a custom
    image that has the packages (deploy/Dockerfile); or the interpreter inside a packed
    ``venv_archive`` of the user's own."""
    env = job_environment(warehouse, region, databases)
    archives = [f"{archive}#project"]
    python = job_python.JOB_PYTHON
    if deps_archive:
        archives.append(f"{deps_archive}#deps")
        env["PYTHONPATH"] += ":./deps"
    if venv_archive:
        archives.append(f"{venv_archive}#environment")
        python = "./environment/bin/python"
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = python
    return env, archives


def spark_parameters(
    archive: str,
    warehouse: str,
    deps_archive: str | None = None,
    venv_archive: str | None = None,
    watch: bool = False,
    databases: tuple[str, str] = DATABASES,
    *,
    region: str,
    decoder: str | None = None,
) -> str:
    """spark-submit parameters of an EMR Serverless job of this project: the one list that
    ``emr submit`` sends and the template's schedules carry (a test compares them). Every
    variable goes to the driver and to the executors. ``watch`` sizes a long-running ``watch``
    small. ``decoder``: the decoder jar's URI (None: beside ``archive``, where ``packaging.upload``
    puts it)."""
    env, archives = job_setup(archive, warehouse, region, deps_archive, venv_archive, databases)
    parts = [f"--conf spark.jars={jars(archive, decoder)}"]
    parts += [f"--conf spark.archives={','.join(archives)}"]
    parts += [f"--conf spark.emr-serverless.driverEnv.{k}={v}" for k, v in env.items()]
    parts += [f"--conf spark.executorEnv.{k}={v}" for k, v in env.items()]
    if watch:
        parts += [f"--conf {setting}" for setting in WATCH_SIZE]
    return " ".join(parts)


def start_serverless(client: Any, request: dict[str, Any]) -> str:
    """Start one job run (``job_run_request``); return its id."""
    return str(client.start_job_run(**request)["jobRunId"])


WATCH_RETRIES = 5
# EMR Serverless's "no limit" for a job run's executionTimeoutMinutes (the default is 720).
NO_TIMEOUT = 0


def is_watch(arguments: list[str]) -> bool:
    """A ``watch`` runs until stopped: a streaming run, sized small (``WATCH_SIZE``)."""
    return arguments[:1] == ["watch"]


def is_small(arguments: list[str]) -> bool:
    """Sized small (``WATCH_SIZE``): a ``watch``, and ``doctor``'s probe."""
    return is_watch(arguments) or arguments[:1] == ["doctor"]


def job_run_request(
    application_id: str,
    role_arn: str,
    entry_point: str,
    arguments: list[str],
    parameters: str,
    name: str,
    token: str | None = None,
) -> dict[str, Any]:
    """The StartJobRun request of one run (``emr submit --dry-run`` prints it). Its
    ``clientToken`` is fresh for every intended run: a token derived from the command repeated
    tomorrow's identical ``sync``, and EMR Serverless answered with yesterday's run instead of
    starting one. boto3's own retries of this one call reuse it."""
    request: dict[str, Any] = {
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
    if is_watch(arguments):
        # A watch runs until stopped: a streaming run, restarted by the service after a
        # failure (at most WATCH_RETRIES times an hour), with no time limit: a run without
        # executionTimeoutMinutes is cancelled after 12 hours, streaming or not.
        request["mode"] = "STREAMING"
        request["retryPolicy"] = {"maxFailedAttemptsPerHour": WATCH_RETRIES}
        request["executionTimeoutMinutes"] = NO_TIMEOUT
    return request


def add_step(client: Any, cluster_id: str, step: dict[str, Any]) -> str:
    """Add one step (``step_request``) to an EMR on EC2 cluster; return its id."""
    answer = client.add_job_flow_steps(JobFlowId=cluster_id, Steps=[step])
    return str(answer["StepIds"][0])


def step_request(
    entry_point: str,
    arguments: list[str],
    archive: str,
    name: str,
    warehouse: str,
    region: str,
    deps_archive: str | None = None,
) -> dict[str, Any]:
    """One EMR on EC2 step (``emr submit --dry-run`` prints it): spark-submit through
    command-runner.jar in cluster mode. The driver runs in YARN's application master, where
    ``spark.yarn.appMasterEnv.*`` sets its environment and the archives are unpacked (in client
    mode the driver ran on the primary node without either, and LAKEHOUSE_TARGET never
    reached it)."""
    env, archives = job_setup(archive, warehouse, region, deps_archive)
    command = ["spark-submit", "--deploy-mode", "cluster"]
    command += ["--conf", f"spark.jars={jars(archive)}"]
    command += ["--conf", f"spark.archives={','.join(archives)}"]
    for key, value in env.items():
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
    current, detail, elapsed = polling.poll_until(state, done | failed, what, poll_seconds, report)
    if current in failed:
        raise EmrError(f"{what}: {current} after {elapsed:.0f}s: {detail or 'no detail'}")
    report(f"{what}: {current} after {elapsed:.0f}s")
    return current


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
