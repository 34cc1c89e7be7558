"""Shared fixtures: one real Spark session with the real Iceberg catalog, in a scratch lakehouse.

Every test session gets its own LAKEHOUSE_HOME (set before Spark starts), so tests never touch
the demo's `.lakehouse/`. dbt runs in-process and shares the session's Spark (dbt-spark's
`session` method calls SparkSession.builder.getOrCreate()).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import ROOT, copy_project


def pytest_configure(config: pytest.Config) -> None:
    import shutil
    import tempfile

    import aws_calls

    aws_calls.install()  # every AWS call of the suite, for tests/aws/test_permissions.py

    home = Path(tempfile.mkdtemp(prefix="lakehouse-tests-"))
    os.environ["LAKEHOUSE_HOME"] = str(home)
    # The committed schema files, copied: tests may edit or remove them.
    shutil.copytree(ROOT / "schemas", home / "schemas")
    os.environ["LAKEHOUSE_SCHEMA_DIR"] = str(home / "schemas")
    os.environ["LAKEHOUSE_PROJECT_DIR"] = str(ROOT)
    os.environ.setdefault("LAKEHOUSE_SHUFFLE_PARTITIONS", "2")
    os.environ.setdefault("LAKEHOUSE_DRIVER_MEMORY", "1g")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The permission check reads every AWS call the other tests made: it runs last."""
    items.sort(key=lambda item: item.get_closest_marker("after_the_rest") is not None)


@pytest.fixture(scope="session")
def lakehouse_home() -> Path:
    return Path(os.environ["LAKEHOUSE_HOME"])


@pytest.fixture(scope="session")
def spark():
    from ingestion.spark.spark_config import build_spark

    session = build_spark("tests")
    yield session
    session.stop()


def reset_lakehouse(spark) -> None:
    """Drop every table and view of the two namespaces (each test module starts empty): out of
    the catalog, then the namespaces' folders removed from the local warehouse. That deletes
    what ``drop table ... purge`` deletes, without the Spark job purge runs per table to find
    the files (about half a second a reset)."""
    import shutil
    from urllib.parse import urlparse

    warehouse = Path(urlparse(spark.conf.get("spark.sql.catalog.lake.warehouse")).path)
    for namespace in ("lakehouse", "staging"):
        for row in spark.sql(f"show views in lake.{namespace}").collect():
            spark.sql(f"drop view if exists lake.{namespace}.`{row['viewName']}`")
        for row in spark.sql(f"show tables in lake.{namespace}").collect():
            spark.sql(f"drop table if exists lake.{namespace}.`{row['tableName']}`")
        shutil.rmtree(warehouse / namespace, ignore_errors=True)


@pytest.fixture
def clean_lakehouse(spark) -> Iterator[None]:
    reset_lakehouse(spark)
    yield


@pytest.fixture(scope="session")
def samples(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Small full exports of books and orders (60 items each), in AWS's layout."""
    from ingestion.samples import sample_exports

    out = tmp_path_factory.mktemp("exports")
    return sample_exports.write_samples(out, items=60, seed=11)


@pytest.fixture
def project_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the project the test may change (``support.copy_project``)."""
    return copy_project(tmp_path, monkeypatch)


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """A full export of ``orders`` and its incrementals (``orders_reference``), per module."""
    from orders_reference import write_chain

    return write_chain(tmp_path_factory.mktemp("chain"))
