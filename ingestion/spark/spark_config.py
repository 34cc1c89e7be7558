"""The Spark/Iceberg configuration, read from the one place it is defined: profiles.yml.

dbt's profile (``method: session``) passes ``server_side_parameters`` to ``SparkSession.builder``.
Spark jobs and tests render the very same parameters here, with dbt's ``env_var()`` semantics, so
the configuration cannot drift between ingestion and dbt.
"""

from __future__ import annotations

import copy
import os
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import yaml

from ingestion.config import settings
from ingestion.config.errors import LakehouseError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROFILE_NAME = "dynamodb_lakehouse"
_MISSING = object()


class ConfigError(LakehouseError):
    """The configuration cannot be rendered (unknown target, missing variable...)."""


def _env_var(name: str, default: Any = _MISSING) -> str:
    if name in os.environ:
        return os.environ[name]
    if default is _MISSING:
        raise ConfigError(f"profiles.yml needs the environment variable {name}, which is not set")
    return str(default)


# A call of dbt's env_var() with a literal name, in any file dbt renders (profiles.yml, models).
ENV_VAR_CALL = re.compile(r"""env_var\(\s*['"]([^'"]+)['"]""")


def env_var_names(text: str) -> set[str]:
    """The environment variables ``text`` reads through ``env_var('NAME')``."""
    return set(ENV_VAR_CALL.findall(text))


def _render(value: Any, env: jinja2.Environment) -> Any:
    if isinstance(value, str):
        return env.from_string(value).render()
    if isinstance(value, dict):
        return {k: _render(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_render(v, env) for v in value]
    return value


def profile_target(profiles_dir: Path | None = None, target: str | None = None) -> dict[str, Any]:
    """The rendered dbt output (target) of the project's profile. Rendered once while the file,
    the target asked for and the variables it reads stay the same (``_rendered``): each table's
    metadata read asks for the catalog's settings, 55 ms of Jinja a time (a merge of ten tables
    asked 40 times: docs/performance.md, "Many tables in one merge")."""
    path = (profiles_dir or settings.project_dir()) / "profiles.yml"
    text = path.read_text()
    global _rendered
    read = tuple((name, os.environ.get(name)) for name in sorted(env_var_names(text)))
    key = (str(path), text, target, read)
    kept = _rendered  # one read: another thread may replace it (a whole tuple, never half)
    if kept is None or kept[0] != key:
        kept = _rendered = (key, _render_target(path, text, target))
    return copy.deepcopy(kept[1])


# profile_target's last rendering, after what it was rendered from
_rendered: tuple[tuple[Any, ...], dict[str, Any]] | None = None


def _render_target(path: Path, text: str, target: str | None) -> dict[str, Any]:
    raw = yaml.safe_load(text)
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.globals["env_var"] = _env_var
    profile = raw[PROFILE_NAME]
    name = target or _render(profile.get("target", "local"), env)
    outputs = profile["outputs"]
    if name not in outputs:
        raise ConfigError(f"target {name!r} is not in {path} (known: {', '.join(outputs)})")
    return dict(_render(outputs[name], env))


def spark_conf(target: str | None = None) -> dict[str, str]:
    """The Spark settings of the active target, as strings."""
    settings.export_environment()
    params = profile_target(target=target).get("server_side_parameters") or {}
    return {str(k): str(v) for k, v in params.items()}


_UNITS = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
MIN_DRIVER_MEMORY = 512 * 2**20  # Spark refuses a heap under 450 MB; the JVM gives a bit less


def _check_driver_memory(memory: str | None) -> None:
    """Refuse a driver memory Spark would refuse, before a JVM starts and prints its stack."""
    if memory is None:
        return
    text = memory.strip().lower().removesuffix("b")
    unit = _UNITS.get(text[-1:], 1) if text[-1:].isalpha() else 2**20  # a bare number: MiB
    number = text[:-1] if text[-1:].isalpha() else text
    if not number.isdigit():
        raise ConfigError(
            f"driver memory {memory!r} (LAKEHOUSE_DRIVER_MEMORY): not a size like 2g or 1536m"
        )
    if int(number) * unit < MIN_DRIVER_MEMORY:
        raise ConfigError(
            f"driver memory {memory} (LAKEHOUSE_DRIVER_MEMORY) is below the 512m Spark needs to "
            "start: give at least 1g (the default is 2g)"
        )


def build_spark(app_name: str = "dynamodb-lakehouse", target: str | None = None) -> SparkSession:
    """The one SparkSession of a process, configured from the profile.

    Under ``spark-submit`` the JVM already exists and settings fixed at launch (master, driver
    memory) come from spark-submit's own flags; everything else applies here.
    """
    from pyspark.sql import SparkSession

    from ingestion.spark import embedded_catalog

    active = SparkSession.getActiveSession()
    if active is not None:  # one session per process: dbt and later commands reuse it
        return active
    conf = spark_conf(target)
    _check_driver_memory(conf.get("spark.driver.memory"))
    embedded_catalog.bootstrap(conf)
    # Python workers (``verify`` compares in Python) run this process's Python, which has the
    # project's packages; spark-submit and EMR set their own (ingestion.spark.spark_submit).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("LAKEHOUSE_SPARK_LOG_LEVEL", "WARN"))
    if settings.verbose():  # conf/log4j2.properties turns them off: a user's error is one line
        _set_levels(spark, TASK_FAILURE_LOGGERS, "ERROR")
    return spark


def _set_levels(spark: SparkSession, loggers: tuple[str, ...], level: str) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    for name in loggers:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            name, getattr(jvm.org.apache.logging.log4j.Level, level)
        )


# Spark logs every failed task (an ERROR with its Java stack trace) before the job fails, also
# when the failure is an expected path: a batch that meets attributes the schema lacks stops
# on purpose, and ingestion adds them and stages it again. A user reads that trace as a failure.
TASK_FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.storage.DiskBlockObjectWriter",
    # A write whose own task fails (no shuffle before it): the task's trace ("Aborting task",
    # logged by Utils, which the properties filter out by message) and the write's abort.
    "org.apache.spark.sql.execution.datasources.v2",
    "org.apache.spark.util.Utils",
    "org.apache.iceberg.spark.source.SparkWrite",  # its abort: "Skipping cleanup of written files"
    # A task that ran out of memory: its stack, before the command's own line says so
    # (ingestion.spark.out_of_memory).
    "org.apache.spark.util.SparkUncaughtExceptionHandler",
)


# The loggers' levels before the first of the blocks open now (a watch ingests several tables
# on threads of one process, each in such a block): restored when the last one ends, not when the
# first does, which would leave them off for good.
_quiet_lock = threading.Lock()
_quiet: dict[str, Any] = {"depth": 0, "saved": {}}


@contextmanager
def quiet_task_failures(spark: SparkSession) -> Iterator[None]:
    """Silence Spark's per-task failure logs for the block; the failure itself still raises
    (and the caller turns it into a one-line error). Blocks may overlap on several threads."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    configurator = jvm.org.apache.logging.log4j.core.config.Configurator
    manager = jvm.org.apache.logging.log4j.LogManager
    with _quiet_lock:
        if _quiet["depth"] == 0:
            _quiet["saved"] = {
                name: manager.getLogger(name).getLevel() for name in TASK_FAILURE_LOGGERS
            }
            for name in TASK_FAILURE_LOGGERS:
                configurator.setLevel(name, jvm.org.apache.logging.log4j.Level.OFF)
        _quiet["depth"] += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet["depth"] -= 1
            if _quiet["depth"] == 0:
                for name, level in _quiet["saved"].items():
                    configurator.setLevel(name, level)


def init_catalog() -> Path | None:
    """The embedded catalog and its namespaces created for the active target (``init``); None
    when the target has no embedded catalog (Glue, a Hive metastore)."""
    from ingestion.spark import embedded_catalog

    return embedded_catalog.bootstrap(spark_conf())
