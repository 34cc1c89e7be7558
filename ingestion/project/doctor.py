"""``doctor``'s checks that run where the project runs (what ``dbt debug`` is to dbt). Each check
gives one line: ✓ with what it found, or ✗ with the fix.

``local_checks``: Java, the jars, the catalog file, the dbt project (parsed in this process, no
JVM) and the free disk under ``LAKEHOUSE_HOME``. ``job_checks``: inside a job on the deployment
(``doctor --in-job``, what ``doctor --aws --probe`` submits): its Python and dbt, Iceberg on the
classpath, both databases, a scratch table. ``ingestion.aws.doctor`` checks an AWS account.
"""

from __future__ import annotations

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
    return Check("jars", True, f"Iceberg and SQLite JDBC in {spark_jars.pyspark_jars_dir()}")


def catalog() -> Check:
    from ingestion.light.catalog import catalog_file

    path = catalog_file()
    if not path.is_file():
        return Check("catalog", True, f"{path}: not created yet (the first ingest creates it)")
    with path.open("rb") as f:
        if not f.read(16).startswith(b"SQLite format 3"):
            return Check("catalog", False, f"{path} is no SQLite file: move it away")
    return Check("catalog", True, str(path))


def dbt_project() -> Check:
    from ingestion.merge import runner

    try:
        runner.dbt_invoke(["parse"])
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
        checks.append(Check("iceberg", False, f"not on the classpath ({type(exc).__name__}): "
                            f"spark.jars must name EMR's Iceberg jar"))  # fmt: skip
    for namespace in names.NAMESPACES:
        checks.append(_namespace(spark, namespace))
    checks.append(_scratch_table(spark))
    return checks


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
