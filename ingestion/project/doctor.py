"""``doctor``'s checks that run where the project runs (what ``dbt debug`` is to dbt). Each check
gives one line: ✓ with what it found, or ✗ with the fix.

``local_checks``: Java, the jars, the catalog file, the dbt project (parsed in this process, no JVM)
and the free disk under ``LAKEHOUSE_HOME``. ``job_checks``: inside a job on the deployment (``doctor
--in-job``, what ``doctor --aws --probe`` submits): its Python and dbt, Iceberg and staging's
decoder on the classpath, both databases, a scratch table, and on AWS one call to each service the
job's Python reaches (``endpoint_checks``). ``ingestion.aws.account_doctor`` checks an AWS account.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ingestion.config import names, settings

MIN_JAVA = 17
MIN_FREE_GB = 2.0


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str  # what was found; when not ok, what to do

    def line(self) -> str:
        return f"{'✓' if self.ok else '✗'} {self.name}: {self.detail}"


def java() -> Check:
    found = shutil.which("java")
    if not found:
        return Check("java", False, f"no java on PATH: install OpenJDK {MIN_JAVA} (make setup)")
    done = subprocess.run([found, "-version"], capture_output=True, text=True, timeout=60)
    text = done.stderr + done.stdout
    version = re.search(r'version "(\d+)', text)
    major = int(version.group(1)) if version else 0
    if major < MIN_JAVA:
        return Check("java", False, f"Java {major or '?'} at {found}: Spark here needs {MIN_JAVA}")
    return Check("java", True, f"Java {major} ({found})")


def jars() -> Check:
    from ingestion.spark import jars as spark_jars

    missing = spark_jars.missing_jars()
    if missing:
        return Check("jars", False, "; ".join(missing))
    return Check(
        "jars", True, f"Iceberg, SQLite JDBC and the decoder in {spark_jars.pyspark_jars_dir()}"
    )


def catalog() -> Check:
    from ingestion.catalog.table_metadata import catalog_file

    path = catalog_file()
    if not path.is_file():
        return Check("catalog", True, f"{path}: not created yet (the first ingest creates it)")
    with path.open("rb") as f:
        if not f.read(16).startswith(b"SQLite format 3"):
            return Check("catalog", False, f"{path} is no SQLite file: move it away")
    return Check("catalog", True, str(path))


def dbt_project() -> Check:
    from ingestion.merge import dbt_process, model_tests

    try:
        model_tests.migrate_models()  # a model YAML from before a test's rename parses again
        dbt_process.dbt_invoke(["parse"])
    except Exception as exc:
        return Check("dbt project", False, str(exc).splitlines()[0])
    return Check("dbt project", True, f"parsed ({settings.project_dir()})")


def disk() -> Check:
    home = settings.lakehouse_home()
    folder = home if home.exists() else home.parent
    free = shutil.disk_usage(folder).free / 1e9
    if free < MIN_FREE_GB:
        return Check(
            "disk", False, f"{free:.1f} GB free under {folder}: free at least {MIN_FREE_GB:g} GB"
        )
    return Check("disk", True, f"{free:.0f} GB free under {folder}")


LOCAL: tuple[Callable[[], Check], ...] = (java, jars, catalog, dbt_project, disk)


def local_checks() -> list[Check]:
    return [check() for check in LOCAL]


def job_checks(spark: Any) -> list[Check]:
    """``doctor --in-job``: what only a job on the deployment can show, run inside one (what
    ``doctor --aws --probe`` submits): the job's Python and dbt, Iceberg on the classpath, both
    databases reachable, and a scratch Iceberg table created, written, read and dropped."""
    checks = [_python()]
    try:
        from dbt.version import __version__ as dbt_version

        checks.append(Check("dbt", True, f"dbt-core {dbt_version}"))
    except ImportError as exc:
        checks.append(Check("dbt", False, f"{exc}: the dependency archive is not on PYTHONPATH"))
    jvm = spark.sparkContext._jvm
    try:
        version = jvm.org.apache.iceberg.IcebergBuild.fullVersion()
        checks.append(Check("iceberg", True, str(version)))
    except Exception as exc:
        checks.append(
            Check(
                "iceberg",
                False,
                f"not on the classpath ({type(exc).__name__}): "
                f"spark.jars must name EMR's Iceberg jar",
            )
        )
    checks.append(_decoder(spark))
    for namespace in names.NAMESPACES:
        checks.append(_namespace(spark, namespace))
    checks.append(_scratch_table(spark))
    if settings.target() in AWS_TARGETS:
        checks += endpoint_checks()
    return checks


def _decoder(spark: Any) -> Check:
    """Staging's decoder (decision 0013) loaded and run on one item, as staging runs it."""
    from ingestion.schema import item_decoder
    from ingestion.schema.types import Attribute, ColumnType, Schema

    schema = Schema("doctor", (Attribute("id", "id", ColumnType("string"), key=True),))
    try:
        name = item_decoder.registered(spark, schema, "doctor")
        row = spark.sql(f"""select {name}('{{"id":{{"S":"x"}}}}', null, false) as d""").first()
    except Exception as exc:  # noqa: BLE001 - the check reports whatever stops the decoder
        return Check("decoder", False, f"{str(exc).splitlines()[0][:300]}")
    if row is None or row["d"]["k0"] != "x":
        return Check("decoder", False, f"decoded {row}: expected the key x")
    return Check("decoder", True, f"{item_decoder.DECODER_CLASS} decodes an item")


# The targets whose jobs call AWS (the rehearsal's through its local stand-ins).
AWS_TARGETS = ("emr", "rehearsal")


def endpoint_checks(client: Callable[[str, str], Any] | None = None) -> list[Check]:
    """What a job's Python calls besides the JVM's Glue and S3: one cheap call to DynamoDB,
    Glue, S3 and CloudWatch in the job's region, each with a
    short timeout and no retry: a service the job's network cannot reach (no VPC endpoint, no
    NAT gateway) fails here in seconds, naming the endpoint it needs. ``client(service,
    region)`` makes the clients (boto3's by default)."""
    region = settings.aws_region()
    if not region:
        return [
            Check(
                "region",
                False,
                "no AWS_REGION: the job parameters set it (emr submit, "
                "deploy/template.yaml); render and submit again",
            )
        ]
    make = client or _short_client
    bucket, prefix = _warehouse()
    calls: dict[str, Callable[[Any], Any]] = {
        "dynamodb": lambda c: c.list_exports(MaxResults=1),
        "glue": lambda c: c.get_database(Name=names.STAGING),
        "s3": lambda c: c.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1),
        # One data point of a metric of its own (never verify's): what verify --metrics sends.
        "cloudwatch": lambda c: c.put_metric_data(
            Namespace=names.METRICS_NAMESPACE,
            MetricData=[{"MetricName": "DoctorProbe", "Value": 1.0, "Unit": "Count"}],
        ),
    }
    return [_reach(service, region, make, call) for service, call in calls.items()]


def _reach(service: str, region: str, make: Callable[[str, str], Any], call: Any) -> Check:
    from botocore.exceptions import ClientError, ConnectionError, HTTPClientError

    name = f"reach {service}"
    client = make(service, region)
    try:
        call(client)
    except (ConnectionError, HTTPClientError) as exc:
        endpoint = client.meta.endpoint_url
        vpc = "monitoring" if service == "cloudwatch" else service
        return Check(
            name,
            False,
            f"cannot reach {endpoint} ({type(exc).__name__}): in a VPC "
            f"without a NAT gateway, add the endpoint com.amazonaws.{region}.{vpc}",
        )
    except ClientError as exc:
        # The network reaches the service: what it answers is the other checks' concern,
        # but for a refusal of the job's credentials, which every later call would meet too.
        error = exc.response.get("Error", {})
        code = str(error.get("Code"))
        if any(word in code.lower() for word in REFUSALS):
            return Check(name, False, f"reached, refused: {code}: {error.get('Message')}")
        return Check(name, True, f"{client.meta.endpoint_url} answered ({code})")
    return Check(name, True, f"{client.meta.endpoint_url} answered")


REFUSALS = ("denied", "unrecognizedclient", "invalidclienttoken", "expiredtoken", "signature")


def _warehouse() -> tuple[str, str]:
    """The warehouse's bucket and prefix (``LAKEHOUSE_WAREHOUSE``, which every job is given)."""
    from ingestion.sources.s3_uri import parse_s3_uri

    return parse_s3_uri(os.environ["LAKEHOUSE_WAREHOUSE"])


def _short_client(service: str, region: str) -> Any:
    import boto3
    from botocore.config import Config

    quick = Config(connect_timeout=5, read_timeout=10, retries={"max_attempts": 1})
    return boto3.client(service, region_name=region, config=quick)


def _python() -> Check:
    """The job's interpreter. An older one than 3.11 never gets here: the package fails at
    import, the probe's job run fails, and ``doctor --probe`` reports that run's error."""
    import sys

    return Check("python", True, f"{'.'.join(map(str, sys.version_info[:3]))} ({sys.executable})")


def _namespace(spark: Any, namespace: str) -> Check:
    try:
        count = len(
            spark.sql(f"show tables in {names.quote_table(names.CATALOG, namespace)}").collect()
        )
    except Exception as exc:
        return Check(f"database {namespace}", False, _first_line(exc))
    return Check(f"database {namespace}", True, f"reachable, {count} tables")


def _scratch_table(spark: Any) -> Check:
    """Create, write, read and drop a scratch table in staging: the catalog's and the
    warehouse's permissions, end to end."""
    import uuid

    name = f"dynamodb_lakehouse_doctor_{uuid.uuid4().hex[:8]}"
    table = names.quote_table(names.CATALOG, names.STAGING, name)
    try:
        spark.sql(f"create table {table} (probe string) using iceberg")
        try:
            spark.sql(f"insert into {table} values ('written')")
            read = spark.table(table).collect()
        finally:
            spark.sql(f"drop table if exists {table} purge")
    except Exception as exc:
        return Check("warehouse", False, _first_line(exc))
    if [r[0] for r in read] != ["written"]:
        return Check("warehouse", False, f"read back {read!r} from {name}")
    return Check("warehouse", True, f"created, wrote, read and dropped {names.STAGING}.{name}")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
