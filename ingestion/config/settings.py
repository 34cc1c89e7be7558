"""Where things are: the project (the dbt project root) and the lakehouse home."""

from __future__ import annotations

import os
from pathlib import Path

from ingestion.config import names
from ingestion.config.errors import LakehouseError

DEFAULT_HOME_NAME = ".lakehouse"


# The folder that holds the installed package: the project itself in an editable install (the
# way `make setup` installs it), site-packages in a wheel's.
INSTALLED_ROOT = Path(__file__).resolve().parents[2]


class ProjectNotFoundError(LakehouseError):
    """No dbt project (``dbt_project.yml``) where the commands look for it."""


def project_dir() -> Path:
    """The project: the dbt project root, which holds ``dbt_project.yml``. Decision, in this
    order: ``LAKEHOUSE_PROJECT_DIR`` (``--project-dir``) when set; the project the package is
    installed from (an editable install: the CLI then works from any folder, as a user of
    ``make setup`` expects); the current folder (a wheel installed apart from its project).
    Else one line saying how to point at it."""
    override = os.environ.get("LAKEHOUSE_PROJECT_DIR")
    if override:
        given = Path(override).resolve()
        if not (given / "dbt_project.yml").is_file():
            raise ProjectNotFoundError(
                f"LAKEHOUSE_PROJECT_DIR (or --project-dir) is {override}, which holds no "
                "dbt_project.yml: point it at the dynamodb-lakehouse project folder"
            )
        return given
    for candidate in (INSTALLED_ROOT, Path.cwd()):
        if (candidate / "dbt_project.yml").is_file():
            return candidate
    raise ProjectNotFoundError(
        f"no dynamodb-lakehouse project (dbt_project.yml) in {Path.cwd()} nor where the package "
        f"is installed ({INSTALLED_ROOT}): run from the project folder, or give --project-dir "
        "DIR (or set LAKEHOUSE_PROJECT_DIR)"
    )


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


def aws_region() -> str | None:
    """The AWS region of this process: ``AWS_REGION`` (what a job on EMR is given, and what
    Lambda sets), else ``AWS_DEFAULT_REGION`` (the only one botocore itself reads); None when
    neither is set. Every AWS client a job builds takes it."""
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None


def export_environment() -> dict[str, str]:
    """Pin the variables every child process (spark-submit, dbt) must agree on, and return them.

    The home is made absolute here so that Iceberg metadata written by any process holds the same
    absolute file locations, whatever directory the process runs from.
    """
    values = {
        "LAKEHOUSE_HOME": str(lakehouse_home()),
        "LAKEHOUSE_PROJECT_DIR": str(project_dir()),
        "DBT_PROFILES_DIR": str(project_dir()),  # profiles.yml at the root, as dbt looks first
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
