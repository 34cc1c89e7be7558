"""The one Spark/Iceberg configuration, rendered from profiles.yml."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingestion.spark import embedded_catalog, spark_config


def test_profile_renders_the_embedded_catalog(lakehouse_home: Path) -> None:
    conf = spark_config.spark_conf()
    assert conf["spark.sql.defaultCatalog"] == "lake"
    assert conf["spark.sql.catalogImplementation"] == "in-memory"
    assert conf["spark.sql.catalog.lake.uri"] == f"jdbc:sqlite:{lakehouse_home}/catalog.db"
    assert conf["spark.sql.catalog.lake.warehouse"] == f"file://{lakehouse_home}/warehouse"
    assert conf["spark.sql.catalog.lake.jdbc.init-catalog-tables"] == "false"
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"


def test_home_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "elsewhere"))
    conf = spark_config.spark_conf()
    assert conf["spark.sql.catalog.lake.uri"] == f"jdbc:sqlite:{tmp_path}/elsewhere/catalog.db"


def test_unknown_target_is_a_clear_error() -> None:
    with pytest.raises(spark_config.ConfigError, match="target 'nowhere' is not in"):
        spark_config.profile_target(target="nowhere")


def test_bootstrap_is_idempotent_and_creates_namespaces(tmp_path: Path) -> None:
    import sqlite3

    conf = {
        "spark.sql.catalog.lake.uri": f"jdbc:sqlite:{tmp_path}/new/catalog.db",
        "spark.sql.catalog.lake.warehouse": f"file://{tmp_path}/new/warehouse",
    }
    for _ in range(2):
        path = embedded_catalog.bootstrap(conf)
    assert path == tmp_path / "new" / "catalog.db"
    assert (tmp_path / "new" / "warehouse").is_dir()
    with sqlite3.connect(path) as db:
        namespaces = {
            r[0] for r in db.execute("select namespace from iceberg_namespace_properties")
        }
        mode = db.execute("pragma journal_mode").fetchone()[0]
    assert namespaces == {"staging", "lakehouse"}
    assert mode == "wal"


def test_emr_and_hive_targets_are_one_setting_away(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_WAREHOUSE", "s3://bucket/warehouse")
    monkeypatch.setenv("LAKEHOUSE_TARGET", "emr")
    emr = spark_config.spark_conf()
    assert emr["spark.sql.catalog.lake.catalog-impl"] == "org.apache.iceberg.aws.glue.GlueCatalog"
    assert emr["spark.sql.catalog.lake.warehouse"] == "s3://bucket/warehouse"
    assert "spark.master" not in emr and "spark.driver.bindAddress" not in emr
    assert embedded_catalog.bootstrap(emr) is None  # no embedded catalog file on EMR
    monkeypatch.setenv("LAKEHOUSE_TARGET", "hive")
    monkeypatch.setenv("LAKEHOUSE_METASTORE_URI", "thrift://metastore:9083")
    hive = spark_config.spark_conf()
    assert hive["spark.sql.catalog.lake.type"] == "hive"
    assert hive["spark.sql.catalog.lake.uri"] == "thrift://metastore:9083"
    monkeypatch.delenv("LAKEHOUSE_METASTORE_URI")
    with pytest.raises(spark_config.ConfigError, match="LAKEHOUSE_METASTORE_URI"):
        spark_config.spark_conf()


@pytest.mark.integration
def test_quiet_blocks_on_threads_restore_the_levels_when_the_last_ends(spark) -> None:
    """Two overlapping blocks (a watch stages tables on threads), the first to begin ending
    first: the other stays quiet until it ends, and then the levels are as they were (restoring
    each block's own saved levels left them off for good)."""
    import threading

    jvm = spark.sparkContext._jvm
    manager, configurator = (
        jvm.org.apache.logging.log4j.LogManager,
        jvm.org.apache.logging.log4j.core.config.Configurator,
    )
    name = spark_config.TASK_FAILURE_LOGGERS[0]
    saved = manager.getLogger(name).getLevel()
    configurator.setLevel(name, jvm.org.apache.logging.log4j.Level.WARN)  # the tests' is OFF
    second_in, first_out = threading.Event(), threading.Event()
    seen: list[str] = []

    def second() -> None:
        with spark_config.quiet_task_failures(spark):
            second_in.set()
            first_out.wait(30)
            seen.append(str(manager.getLogger(name).getLevel()))

    thread = threading.Thread(target=second)
    with spark_config.quiet_task_failures(spark):
        thread.start()
        second_in.wait(30)
    first_out.set()
    thread.join(30)
    level = str(manager.getLogger(name).getLevel())
    configurator.setLevel(name, saved)
    assert seen == ["OFF"]  # still quiet after the first block ended
    assert level == "WARN"


@pytest.mark.slow
def test_a_plain_spark_submit_has_the_clis_driver_memory_and_quiet_logging(tmp_path: Path) -> None:
    """The documented `spark-submit ingestion/main.py ...` (docs/cli.md) starts its JVM as the
    CLI does: the profile's driver memory and conf/log4j2.properties, from the files `make setup`
    links into PySpark's conf folder; before, it ran with Spark's 1 GB default and INFO lines."""
    import os
    import subprocess
    import sys

    import yaml

    from ingestion.spark import jars

    profile = yaml.safe_load((jars.project_conf_dir().parent / "profiles.yml").read_text())
    memory = profile["dynamodb_lakehouse"]["outputs"]["local"]["server_side_parameters"][
        "spark.driver.memory"
    ]
    assert "'2g'" in memory  # the profile's default, which conf/spark-defaults.conf repeats
    assert (
        "\nspark.driver.memory 2g\n"
        in (jars.project_conf_dir() / "spark-defaults.conf").read_text()
    )
    for name in jars.CONF_FILES:
        assert (jars.pyspark_conf_dir() / name).resolve() == (jars.project_conf_dir() / name)
    job = tmp_path / "job.py"
    job.write_text(
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "jvm = spark.sparkContext._jvm\n"
        "print('memory', spark.conf.get('spark.driver.memory'))\n"
        "print('heap', jvm.java.lang.Runtime.getRuntime().maxMemory())\n"
        "print('level', jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONF_DIR"}
    submit = Path(sys.executable).parent / "spark-submit"
    done = subprocess.run(
        [str(submit), str(job)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert said["memory"] == "2g"
    assert int(said["heap"]) > 1.5 * 2**30  # a 2 GB heap, not Spark's 1 GB default
    assert said["level"] == "WARN"
    assert " INFO " not in done.stderr


def test_the_profile_is_rendered_again_only_when_what_it_reads_changes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Rendered once (each table's metadata read asks for it): again when a variable it reads,
    the target or profiles.yml changes; a caller that changes what it got changes nothing
    kept."""
    renders = []
    real = spark_config._render_target
    monkeypatch.setattr(spark_config, "_render_target", lambda *a: renders.append(a) or real(*a))
    monkeypatch.setattr(spark_config, "_rendered", None)
    first = spark_config.spark_conf()
    first["spark.sql.defaultCatalog"] = "changed by a caller"
    assert spark_config.spark_conf()["spark.sql.defaultCatalog"] == "lake"
    assert len(renders) == 1
    # A variable profiles.yml does not read (the merge's values, set for each dbt command):
    # nothing rendered again.
    monkeypatch.setenv("DYNAMODB_LAKEHOUSE_RUN", '{"batches": []}')
    spark_config.spark_conf()
    assert len(renders) == 1
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path / "moved"))
    assert spark_config.spark_conf()["spark.sql.catalog.lake.uri"].endswith("/moved/catalog.db")
    assert len(renders) == 2
    spark_config.profile_target(target="local")  # named, not the default: rendered again
    assert len(renders) == 3
    project = tmp_path / "project"
    project.mkdir()
    profiles = (spark_config.settings.project_dir() / "profiles.yml").read_text()
    (project / "profiles.yml").write_text(profiles)
    spark_config.profile_target(project)
    (project / "profiles.yml").write_text(profiles.replace("spark.sql.defaultCatalog", "spark.x"))
    assert "spark.x" in spark_config.profile_target(project)["server_side_parameters"]
    assert len(renders) == 5
