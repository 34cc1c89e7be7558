"""Where things are: the project (the dbt project root) and the lakehouse home."""

from __future__ import annotations

import os
from pathlib import Path

from ingestion.config import names

DEFAULT_HOME_NAME = ".lakehouse"


def project_dir() -> Path:
    """The repository root (it holds dbt_project.yml). ``LAKEHOUSE_PROJECT_DIR`` overrides."""
    override = os.environ.get("LAKEHOUSE_PROJECT_DIR")
    if override:
        return Path(override).resolve()
    here = Path(__file__).resolve().parents[1]
    if (here / "dbt_project.yml").is_file():
        return here
    return Path.cwd()


def lakehouse_home() -> Path:
    """``$LAKEHOUSE_HOME``, default ``.lakehouse/`` at the repository root; always absolute."""
    value = os.environ.get("LAKEHOUSE_HOME")
    home = Path(value) if value else project_dir() / DEFAULT_HOME_NAME
    if not home.is_absolute():
        home = project_dir() / home
    return home.resolve()


def verbose() -> bool:
    """``-v``: the logs of every part (ours at DEBUG, dbt's on screen, Spark's task failures)."""
    return os.environ.get("LAKEHOUSE_VERBOSE") == "1"


def target() -> str:
    """The profile target the commands run against (``LAKEHOUSE_TARGET``, default ``local``)."""
    return os.environ.get("LAKEHOUSE_TARGET", "local")


def export_environment() -> dict[str, str]:
    """Pin the variables every child process (spark-submit, dbt) must agree on, and return them.

    The home is made absolute here so that Iceberg metadata written by any process holds the same
    absolute file locations, whatever directory the process runs from.
    """
    values = {
        "LAKEHOUSE_HOME": str(lakehouse_home()),
        "LAKEHOUSE_PROJECT_DIR": str(project_dir()),
        "DBT_PROFILES_DIR": str(project_dir() / "profiles"),
        names.STAGING_VARIABLE: names.STAGING,  # dbt reads the namespaces from these
        names.FINAL_VARIABLE: names.FINAL,
    }
    if os.environ.get("LAKEHOUSE_TARGET", "local") == "local":
        # The embedded default listens on loopback only. On a cluster the driver must not.
        values["SPARK_LOCAL_IP"] = "127.0.0.1"
    # Spark's logging configuration (conf/log4j2.properties), unless the user has their own.
    os.environ.setdefault("SPARK_CONF_DIR", str(project_dir() / "conf"))
    os.environ.update(values)
    return values
