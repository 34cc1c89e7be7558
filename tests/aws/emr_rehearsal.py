"""Run the project's EMR Serverless job on this machine the way EMR runs it.

What EMR Serverless does with a job run, and how each step is rehearsed here:

- It downloads ``spark.archives`` and unpacks each into the driver's working directory under its
  alias (``#project``, ``#deps``). Here: the archives are downloaded from the local S3 endpoint
  (moto's server, a test double for AWS only) with boto3 and unpacked into an empty folder.
- It sets ``spark.emr-serverless.driverEnv.*`` as the driver's environment. Here: the same
  variables are the only project variables of the spark-submit process (``env -i``), not this
  test's environment.
- It runs ``spark-submit`` with the other parameters, on a Spark whose classpath has no Iceberg:
  EMR keeps Iceberg's runtime jar in /usr/share/aws/iceberg/lib, loaded only when a job names it.
  Here: a Spark home made of PySpark's own jars without the Iceberg and SQLite jars that the
  embedded default links into them; ``spark.jars`` is kept, with EMR's path mapped to the same
  Iceberg jar (1.10.2) on this machine, plus the stand-ins below.
- The driver's Python is the release's ``/usr/bin/python3.11``, with no packages of its own.
  Here: a virtual environment of this machine's CPython 3.11 made with nothing installed.
- The executors run apart from the driver, on their own workers, whose environment is the
  platform's (the role's credentials) plus ``spark.executorEnv.*``, never the driver's; each
  executor unpacks ``spark.archives`` into its own working directory. Here: a standalone Spark
  master and worker (``cluster``) started in processes of their own with only the platform's
  stand-ins in their environment (``local-cluster`` would start them inside the driver's JVM, and
  every executor would inherit the driver's ``PYTHONPATH``); ``spark.archives`` goes to Spark
  with the downloaded files, so each executor unpacks its own copies.
- It injects no region: only what the job parameters set. Here: no ``AWS_REGION`` but theirs.

What cannot run here and has a stand-in: the Glue Data Catalog (Iceberg's JDBC catalog behind
``rehearsal/NoViewCatalog.java``, compiled here, which like GlueCatalog is no view catalog: Spark
lists no views in it and cannot create one; the profile's ``rehearsal`` target), S3FileIO and EMRFS
(S3A on the local S3 endpoint, its jars added to ``spark.jars``), EMR's own Spark build (Apache
Spark 3.5.9 from PyPI). A parameter this harness does not know fails the rehearsal: a new parameter
must be thought through here, not passed on blindly.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingestion.aws import emr, job_python
from ingestion.spark import jars

ENV_PREFIX = "spark.emr-serverless.driverEnv."


@dataclass
class Job:
    """One rehearsed job: its working directory, spark-submit's flags and environment."""

    work: Path
    confs: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


def emr_like_spark_home(folder: Path) -> Path:
    """Spark without Iceberg or the decoder on its classpath: PySpark's bin, python and jars,
    less the jars the embedded default links into ``pyspark/jars`` (on EMR both come from
    ``spark.jars``)."""
    pyspark = jars.pyspark_jars_dir().parent
    home = folder / "spark"
    if home.is_dir():
        return home
    (home / "jars").mkdir(parents=True)
    (home / "python").mkdir()
    (home / "bin").symlink_to(pyspark / "bin")
    (home / "python" / "lib").symlink_to(pyspark / "python" / "lib")
    embedded = {jar.name for jar in jars.required_jars()} | {jars.DECODER_JAR}
    for jar in sorted((pyspark / "jars").iterdir()):
        if jar.name not in embedded:
            (home / "jars" / jar.name).symlink_to(jar.resolve())
    return home


def image_python(folder: Path) -> Path:
    """A CPython 3.11 with no packages: what ``/usr/bin/python3.11`` is on EMR 7.x."""
    target = folder / "python3.11"
    if not target.is_dir():
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", "--without-pip", str(target)], check=True)
    return target / "bin" / "python"


def _unpack(archive: Path, into: Path) -> None:
    into.mkdir(parents=True)
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as bundle:
            bundle.extractall(into)
    else:
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter="data")


def prepare(parameters: str, s3: Any, work: Path, python: Path) -> Job:
    """Turn the rendered ``sparkSubmitParameters`` into a job in the empty folder ``work``."""
    tokens = shlex.split(parameters)
    if len(tokens) % 2 or any(flag != "--conf" for flag in tokens[::2]):
        raise AssertionError(f"only --conf pairs are rehearsed: {parameters}")
    job = Job(work)
    work.mkdir(parents=True)
    for setting in tokens[1::2]:
        key, _, value = setting.partition("=")
        if key == "spark.jars":
            job.confs.append(f"spark.jars={','.join(_local_jars(value, s3, work))}")
        elif key == "spark.archives":
            # The driver's copies here; the executors unpack their own from Spark.
            downloaded = []
            for entry in value.split(","):
                uri, _, alias = entry.partition("#")
                bucket, object_key = uri[len("s3://") :].split("/", 1)
                local = work.parent / "downloads" / Path(object_key).name
                local.parent.mkdir(exist_ok=True)
                s3.download_file(bucket, object_key, str(local))
                _unpack(local, work / alias)
                downloaded.append(f"{local.as_uri()}#{alias}")
            job.confs.append(f"spark.archives={','.join(downloaded)}")
        elif key.startswith(ENV_PREFIX):
            job.env[key[len(ENV_PREFIX) :]] = value
        elif key.startswith("spark.executorEnv."):
            job.confs.append(setting)
        else:
            raise AssertionError(f"the rehearsal does not know what EMR does with {key}")
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        if job.env.get(name) == job_python.JOB_PYTHON:
            job.env[name] = str(python)
    job.confs = [c.replace(f"={job_python.JOB_PYTHON}", f"={python}") for c in job.confs]
    return job


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _base_env(spark_home: Path, home: Path) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "SPARK_HOME": str(spark_home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        **({"JAVA_HOME": os.environ["JAVA_HOME"]} if "JAVA_HOME" in os.environ else {}),
    }


@contextmanager
def cluster(spark_home: Path, folder: Path, platform: dict[str, str]) -> Iterator[str]:
    """A standalone master and one worker of 2 cores, each in a process of its own whose
    environment holds only ``platform`` (what EMR's containers give every process: here the
    local S3 endpoint and its credentials, standing in for the job role's); yield its URL.
    Executors get that environment and ``spark.executorEnv.*``, nothing of the driver's."""
    folder.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    env = {**_base_env(spark_home, folder), **platform}
    spark_class = str(spark_home / "bin" / "spark-class")
    commands = {
        "master": [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            "0",
        ],
        "worker": [
            spark_class,
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            "127.0.0.1",
            "--webui-port",
            "0",
            "--cores",
            "2",
            "--memory",
            "4g",
            "--work-dir",
            str(folder / "work"),
            url,
        ],
    }
    processes = []
    try:
        for name, command in commands.items():
            log = (folder / f"{name}.log").open("w")
            processes.append(subprocess.Popen(command, cwd=folder, env=env, stdout=log, stderr=log))
            _wait_for(folder / f"{name}.log", _READY[name], processes[-1])
        yield url
    finally:
        for process in reversed(processes):
            process.terminate()
            process.wait(timeout=60)


_READY = {"master": "I have been elected leader", "worker": "Successfully registered with master"}


def _wait_for(log: Path, line: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while line not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{log.name} never said {line!r}:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


CATALOG_SOURCE = Path(__file__).parent / "rehearsal" / "NoViewCatalog.java"


def cache_dir() -> Path:
    """Where the rehearsal keeps what it builds from inputs that rarely change, between runs and
    clones (as pip keeps its wheels): the job's dependency archive (pip, about 30 s) and the
    stand-in catalog's jar (``javac``), each under a key made from the hash of its inputs, so a
    change of any input builds it again."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "dynamodb-lakehouse" / "rehearsal"


def _iceberg_jar() -> Path:
    return next(j for j in jars.required_jars() if j.name == jars.ICEBERG_JAR).source


def no_view_catalog_jar() -> Path:
    """The stand-in for Glue's catalog, compiled against the Iceberg and Spark jars; kept in
    ``cache_dir`` under the hash of its source and of the jars it is compiled against."""
    spark_jars = sorted(p.name for p in jars.pyspark_jars_dir().glob("*.jar"))
    javac = subprocess.run(["javac", "-version"], capture_output=True, text=True, check=True)
    inputs = [CATALOG_SOURCE.read_text(), _iceberg_jar().name, *spark_jars, javac.stdout]
    key = hashlib.sha256("\n".join(inputs).encode()).hexdigest()[:16]
    jar = cache_dir() / f"no-view-catalog-{key}.jar"
    if jar.is_file():
        return jar
    jar.parent.mkdir(parents=True, exist_ok=True)
    # Built beside its place and renamed into it (one file system): whole or not at all.
    with tempfile.TemporaryDirectory(dir=jar.parent) as scratch:
        classes, built = Path(scratch) / "classes", Path(scratch) / jar.name
        classpath = f"{_iceberg_jar()}:{jars.pyspark_jars_dir()}/*"
        javac = ["javac", "-nowarn", "-d", str(classes), "-cp", classpath, str(CATALOG_SOURCE)]
        subprocess.run(javac, check=True, capture_output=True)
        subprocess.run(["jar", "cf", str(built), "-C", str(classes), "lakehouse"], check=True)
        built.replace(jar)
    return jar


def _local_jars(value: str, s3: Any, work: Path) -> list[str]:
    """``spark.jars`` as the job's JVM gets it: EMR's Iceberg runtime (its local stand-in), and
    the jars the job names in S3 (the decoder) downloaded from the local S3, as EMR fetches
    them."""
    local = []
    for jar in value.split(","):
        if jar == emr.EMR_ICEBERG_JAR:
            local.append(str(_iceberg_jar()))
        elif jar.startswith("s3://"):
            bucket, object_key = jar[len("s3://") :].split("/", 1)
            downloaded = work.parent / "downloads" / Path(object_key).name
            downloaded.parent.mkdir(exist_ok=True)
            s3.download_file(bucket, object_key, str(downloaded))
            local.append(str(downloaded))
        else:
            raise AssertionError(f"no local stand-in for the jar {jar}")
    # Stand-ins for what EMR has on its classpath: S3A for EMRFS, the catalog and its SQLite
    # JDBC driver for Glue's client.
    stand_ins = [*jars.install_aws(), no_view_catalog_jar(), jars.SQLITE_JDBC_JAR]
    return local + [str(p) for p in stand_ins]


def driver_classpath(job: Job, spark_home: Path) -> list[Path]:
    """Every jar the job's driver JVM loads: the Spark home's and ``spark.jars``. A class in
    none of them is one the driver cannot load, whatever else the job does."""
    given = [c.partition("=")[2] for c in job.confs if c.startswith("spark.jars=")]
    listed = [Path(p) for value in given for p in value.split(",") if p]
    return sorted((spark_home / "jars").glob("*.jar")) + listed


def holds_class(classpath: list[Path], name: str) -> bool:
    entry = name.replace(".", "/") + ".class"
    for jar in classpath:
        with zipfile.ZipFile(jar) as archive:
            if entry in archive.namelist():
                return True
    return False


def driver_import(job: Job, spark_home: Path, module: str) -> subprocess.CompletedProcess[str]:
    """Import ``module`` the way the job's driver does before anything starts Spark: the job's
    Python in the job's folder, with only the job's environment and the ``PYTHONPATH``
    spark-submit gives a Python driver (PySpark's own zips first, then the job's). A package
    the job's archives do not hold fails here exactly as on the driver, without a JVM."""
    env = {**_base_env(spark_home, job.work), **job.env}
    lib = spark_home / "python" / "lib"
    zips = [str(p) for p in sorted(lib.glob("*.zip"))]
    env["PYTHONPATH"] = ":".join([*zips, *filter(None, [job.env.get("PYTHONPATH")])])
    python = job.env.get("PYSPARK_DRIVER_PYTHON") or job.env["PYSPARK_PYTHON"]
    return subprocess.run(
        [python, "-c", f"import {module}"],
        cwd=job.work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def run(
    job: Job,
    entry_point: Path,
    arguments: list[str],
    spark_home: Path,
    stand_ins: dict[str, str],
    master: str,
) -> subprocess.CompletedProcess[str]:
    """``spark-submit`` the entry point in the job's folder on ``master`` (``cluster``), with
    only the job's environment (``LAKEHOUSE_TARGET=emr`` becomes ``rehearsal``: the stand-in
    catalog and S3A)."""
    env = {**_base_env(spark_home, job.work), **stand_ins, **job.env}
    if env.get("LAKEHOUSE_TARGET") == "emr":
        env["LAKEHOUSE_TARGET"] = "rehearsal"
    entry = job.work / entry_point.name  # main.py, or the rehearsal's steps.py
    if not entry.exists():
        shutil.copyfile(entry_point, entry)
    # Executors in their own JVMs, on a worker that is not the driver's, as on EMR: what lives
    # only in the driver's environment or on its disk (a path, a variable, an import) fails
    # here as it would there.
    command = [str(spark_home / "bin" / "spark-submit"), "--master", master]
    for conf in job.confs:
        command += ["--conf", conf]
    command += [entry.name, *arguments]
    return subprocess.run(
        command, cwd=job.work, env=env, capture_output=True, text=True, timeout=900, check=False
    )
