"""Run one of the project's commands as its own Spark job: ``spark-submit ingestion/main.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ingestion.config import settings
from ingestion.config.errors import LakehouseError
from ingestion.spark import spark_config


class SubmitError(LakehouseError):
    """A spark-submit job failed."""


def spark_submit(argv: list[str]) -> None:
    """Run ``spark-submit ingestion/main.py ARGV`` with the profile's master and driver memory."""
    conf = spark_config.spark_conf()
    submit = Path(sys.executable).parent / "spark-submit"
    command = [
        str(submit if submit.exists() else "spark-submit"),
        "--master",
        conf.get("spark.master", "local[*]"),
        "--driver-memory",
        conf.get("spark.driver.memory", "2g"),
        str(settings.project_dir() / "ingestion" / "main.py"),
        *argv,
    ]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    print("$ " + " ".join(command[:1] + command[5:]), flush=True)
    if subprocess.run(command, env=env, check=False).returncode != 0:
        raise SubmitError(f"spark-submit {' '.join(argv)} failed (see its output above)")
