"""``doctor``, on this machine: what the embedded default needs before any data flows (what
``dbt debug`` is to dbt). Each check gives one line: ✓ with what it found, or ✗ with the fix.

Java, the jars, the catalog file, the dbt project (parsed in this process, no JVM) and the free
disk under ``LAKEHOUSE_HOME``. ``ingestion.aws.doctor`` adds the checks of an AWS account.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from ingestion.config import settings

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
