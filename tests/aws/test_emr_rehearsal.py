"""The EMR Serverless job, rehearsed on this machine as EMR runs it (tests/aws/emr_rehearsal.py
says how each step is rehearsed and what stands in for Glue, S3 and EMR's image).

The job is built as ``emr submit`` builds it (project.zip, main.py, the dependency archive for
this machine's architecture), uploaded to a local S3 endpoint (moto's server: a test double for
AWS only), and every run starts in a fresh folder, as every EMR job run starts in a fresh
container: a full export is ingested, merged, an incremental chain synced, the table maintained,
its status read. Then the final table is read back with pyiceberg and compared with what the
export files say, and broken jobs show that the rehearsal catches what failed on EMR: two in
a JVM (the catalog has no views; the executors lack the project), two decided by the
parameters alone and checked without one (no dependency archive; no Iceberg jar).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sqlite3
from datetime import timedelta
from pathlib import Path

import boto3
import emr_rehearsal
import local_s3
import pytest
import yaml
from reference import expected, same
from support import ROOT

from ingestion.aws import emr, job_python, packaging
from ingestion.dynamodb import tables
from ingestion.project import onboarding
from ingestion.samples import orders_chain, sample_exports
from ingestion.samples.items import BASE_TIME
from ingestion.schema import item_decoder, schema_file
from ingestion.sources import manifest
from ingestion.spark import spark_config

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.aws]

BUCKET = "lake"
WAREHOUSE = f"s3://{BUCKET}/warehouse"
# Not the defaults: the job takes its databases from the parameters it is sent (the template's
# StagingDatabaseName and FinalDatabaseName), not from names it was built with.
DATABASES = ("ddb_changes", "ddb_tables")
REGION = "us-east-1"  # what the job parameters give it (the template: the stack's region)


def test_rehearsal_target_is_the_emr_target_but_for_the_catalog(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stand-in differs from what runs on EMR in the catalog and the file system only."""
    monkeypatch.setenv("LAKEHOUSE_WAREHOUSE", WAREHOUSE)
    monkeypatch.setenv("LAKEHOUSE_REHEARSAL_CATALOG", "/tmp/glue.db")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1")
    on_emr = spark_config.profile_target(target="emr")["server_side_parameters"]
    rehearsed = spark_config.profile_target(target="rehearsal")["server_side_parameters"]
    stand_ins = {k for k in rehearsed.keys() ^ on_emr.keys()}
    stand_ins |= {k for k in rehearsed.keys() & on_emr.keys() if rehearsed[k] != on_emr[k]}
    catalog = "spark.sql.catalog.lake."
    assert all(k.startswith((catalog, "spark.hadoop.fs.s3")) for k in stand_ins), stand_ins
    assert rehearsed[catalog + "catalog-impl"] == "lakehouse.rehearsal.NoViewCatalog"
    assert "spark.jars" not in on_emr  # a builder jar is not loaded under spark-submit


def _key(image: dict) -> str:
    return json.dumps([image["customer_id"], image["order_id"]], sort_keys=True)


def expected_orders(folders: list[Path]) -> dict[str, dict]:
    """The final table the export files describe: the full export's items, then each
    incremental's changes in write order (a change without NewImage deletes)."""
    rows: dict[str, dict] = {}
    for folder in folders:
        export = manifest.read_export(folder, verify=False)
        lines = [
            json.loads(line)
            for data in export.files
            for line in gzip.open(str(data.path), "rt")
            if line.strip()
        ]
        if "Item" in lines[0]:
            rows.update({_key(line["Item"]): line["Item"] for line in lines})
            continue
        lines.sort(key=lambda line: int(line["Metadata"]["WriteTimestampMicros"]["N"]))
        for line in lines:
            if "NewImage" in line:
                rows[_key(line["Keys"])] = line["NewImage"]
            else:
                rows.pop(_key(line["Keys"]), None)
    return rows


def iceberg_table(catalog_file: Path, endpoint: str, name: str):
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog(
        "lake",
        uri=f"sqlite:///{catalog_file}",
        **{
            "s3.endpoint": endpoint,
            "s3.region": "us-east-1",
            "s3.access-key-id": "testing",
            "s3.secret-access-key": "testing",
        },
    )
    return catalog.load_table(name)


def holds_null(value: dict) -> bool:
    """A DynamoDB JSON value that is or holds NULL, at any depth."""
    ((descriptor, inner),) = value.items()
    if descriptor == "M":
        return any(holds_null(v) for v in inner.values())
    if descriptor == "L":
        return any(holds_null(v) for v in inner)
    return descriptor == "NULL"


def assert_final_orders(catalog_file: Path, endpoint: str, want: dict[str, dict]) -> None:
    """The final table the job wrote, read without Spark, holds exactly the items ``want``:
    each typed column's value as the reference rules decode the item's, and in ``_rest`` only
    attributes of the item, whole."""
    orders = iceberg_table(catalog_file, endpoint, f"{DATABASES[1]}.orders")
    rows = orders.scan().to_arrow().to_pylist()
    got = {_key({k: {"S": r[k]} for k in ("customer_id", "order_id")}): r for r in rows}
    assert got.keys() == want.keys()
    schema = schema_file.from_file(schema_file.table_schema_file(tables.get_table("orders")))
    for key, item in want.items():
        row = got[key]
        rest = json.loads(row["_rest"]) if row["_rest"] else {}
        assert all(item[name] == value for name, value in rest.items()), (key, rest)
        nulls = {name for name, value in item.items() if holds_null(value)}
        assert nulls <= rest.keys(), (key, nulls)  # a NULL anywhere: the attribute in _rest
        for attribute in schema.attributes:
            value = expected(item.get(attribute.name), attribute.type)
            assert same(value, row[attribute.column]), (key, attribute.name, value)


class Rehearsal:
    """The uploaded job and the local stand-ins; ``submit`` runs one job run."""

    def __init__(self, root: Path, endpoint: str, master: str, project: Path = ROOT) -> None:
        self.root, self.endpoint, self.master = root, endpoint, master
        self.s3 = boto3.client("s3", endpoint_url=endpoint, region_name=REGION)
        self.s3.create_bucket(Bucket=BUCKET)
        # The stack's Glue databases, as boto3 sees them (the JVM's catalog is the SQLite
        # stand-in): what doctor's probe asks Glue for.
        glue = boto3.client("glue", endpoint_url=endpoint, region_name=REGION)
        for database in DATABASES:
            glue.create_database(DatabaseInput={"Name": database})
        dist = root / "dist"
        built = packaging.package(dist, project)
        arch = job_python.local_architecture()
        # Built once per content, in a folder of its key (emr_rehearsal.cache_dir), as
        # `emr package` builds it once per key.
        folder = emr_rehearsal.cache_dir() / "deps" / packaging.deps_key(arch, ROOT)
        deps, key = packaging.dependencies(folder, arch, ROOT)
        entry, self.archive = packaging.upload(self.s3, built, BUCKET, "code")
        self.deps = packaging.deps_location(BUCKET, "code", arch, key)
        assert packaging.upload_dependencies(self.s3, deps, self.deps)
        assert not packaging.upload_dependencies(self.s3, deps, self.deps)  # once per content
        self.entry = root / "main.py"
        self.s3.download_file(BUCKET, entry.split("/", 3)[3], str(self.entry))
        self.python = emr_rehearsal.image_python(root)
        self.spark_home = emr_rehearsal.emr_like_spark_home(root)
        self.catalog = root / "glue.db"
        self.runs = 0

    def job(self, parameters: str) -> emr_rehearsal.Job:
        """A job run's fresh folder, its archives unpacked, as EMR starts each run."""
        self.runs += 1
        return emr_rehearsal.prepare(
            parameters, self.s3, self.root / f"run-{self.runs}", self.python
        )

    def driver_import(self, parameters: str, module: str) -> tuple[int, str]:
        done = emr_rehearsal.driver_import(self.job(parameters), self.spark_home, module)
        return done.returncode, done.stderr[-3000:]

    def driver_loads(self, parameters: str, name: str) -> bool:
        """Whether the class ``name`` is on the job's driver classpath."""
        classpath = emr_rehearsal.driver_classpath(self.job(parameters), self.spark_home)
        return emr_rehearsal.holds_class(classpath, name)

    def submit(self, parameters: str, *arguments: str) -> tuple[int, str]:
        job = self.job(parameters)
        # No region but the job parameters': EMR injects none. Every AWS endpoint of the
        # job's Python is the local one (moto's server).
        stand_ins = {
            **local_s3.CREDENTIALS,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ENDPOINT_URL_S3": self.endpoint,
            "LAKEHOUSE_REHEARSAL_CATALOG": str(self.catalog),
        }
        done = emr_rehearsal.run(
            job, self.entry, list(arguments), self.spark_home, stand_ins, self.master
        )
        return done.returncode, done.stderr[-3000:] + "\n--- stdout ---\n" + done.stdout[-4000:]

    def ok(self, *arguments: str) -> str:
        parameters = emr.spark_parameters(
            self.archive, WAREHOUSE, self.deps, databases=DATABASES, region=REGION
        )
        code, output = self.submit(parameters, *arguments)
        assert code == 0, f"{' '.join(arguments)} failed:\n{output}"
        return output


def upload_exports(s3, out: Path, folders: list[Path]) -> list[str]:
    for path in sorted(out.rglob("*")):
        if path.is_file():
            s3.put_object(
                Bucket=BUCKET,
                Key=f"exports/{path.relative_to(out).as_posix()}",
                Body=path.read_bytes(),
            )
    return [f"s3://{BUCKET}/exports/{f.relative_to(out).as_posix()}" for f in folders]


def t_items(qty: list[tuple[str, str]]) -> list[dict]:
    return [{"id": {"S": key}, "qty": {"N": value}} for key, value in qty]


def test_the_emr_job_runs_as_emr_runs_it(tmp_path: Path, project_copy: Path) -> None:
    out = tmp_path / "exports"
    full = sample_exports.write_samples(out, 300, 4, ["orders"])["orders"]
    chain = orders_chain.write_orders_chain(out, 300, 4, increments=2)
    onboarding.add_table("t", "id:S", None)  # a table with no schema file: its types detected
    with (
        local_s3.server() as endpoint,
        emr_rehearsal.cluster(
            emr_rehearsal.emr_like_spark_home(tmp_path / "emr"),
            tmp_path / "cluster",
            {**local_s3.CREDENTIALS, "AWS_ENDPOINT_URL_S3": endpoint},
        ) as master,
    ):
        rehearsal = Rehearsal(tmp_path / "emr", endpoint, master, project_copy)
        full_uri, *chain_uris = upload_exports(rehearsal.s3, out, [full, *chain])

        # ingest, then dbt run + dbt test in a catalog without views, in one process (a JVM
        # start here costs half a minute)
        rehearsal.ok("sync", "--table", "orders", full_uri, *chain_uris)
        rehearsal.ok("maintain", "--table", "orders")
        status = rehearsal.ok("status")
        assert "orders" in status
        # What `doctor --aws --probe` runs on the application: the job's Python with the
        # archive's dbt, Iceberg from spark.jars, both databases, a scratch table, and a call to
        # each AWS service the job's Python reaches, in the region the parameters give it.
        probe = rehearsal.ok("doctor", "--in-job")
        for line in (
            "✓ dbt: dbt-core",
            "✓ iceberg: Apache Iceberg 1.10.2",
            "✓ decoder: ",
            "✓ warehouse: created",
        ):
            assert line in probe, probe
        for service in ("dynamodb", "glue", "s3", "cloudwatch"):
            assert f"✓ reach {service}: {endpoint} answered" in probe, probe

        assert_final_orders(rehearsal.catalog, endpoint, expected_orders([full, *chain]))
        # verify against the full export, whose keys the chain changed after its instant: the
        # second pass runs the project's Python on the executors, which import it from the
        # archives the job parameters give them (not from the driver's environment).
        assert expected_orders([full]) != expected_orders([full, *chain])  # keys changed since
        verified = rehearsal.ok("verify", "--table", "orders", full_uri)
        assert "EQUAL in" in verified and "NOT EQUAL" not in verified, verified
        # The parameters as they were, the executors given PYSPARK_PYTHON alone: on EMR the
        # second pass failed on every such run.
        sent = emr.spark_parameters(
            rehearsal.archive, WAREHOUSE, rehearsal.deps, databases=DATABASES, region=REGION
        )
        driver_only = re.sub(r" --conf spark\.executorEnv\.(?!PYSPARK_PYTHON=)\S+", "", sent)
        assert driver_only.count("spark.executorEnv.") == 1
        code, output = rehearsal.submit(driver_only, "verify", "--table", "orders", full_uri)
        assert code != 0 and "No module named 'ingestion'" in output, output[-2000:]
        with sqlite3.connect(rehearsal.catalog) as catalog:
            spaces = {n for (n,) in catalog.execute("select table_namespace from iceberg_tables")}
        assert spaces == set(DATABASES), spaces  # nothing under the default names

        # Types live in the lakehouse, not on a job's disk: one run detects qty as bigint from a
        # first export and adopts decimal(38,1) from a second; a later run, in a fresh folder,
        # on an export whose items alone are bigint, keeps decimal(38,1) and detects nothing.
        hour = timedelta(hours=1)
        t_exports = [
            sample_exports.write_items_export(
                tmp_path / f"t{n}", "t", t_items(qty), BASE_TIME + n * hour, n
            )
            for n, qty in enumerate(
                ([("a", "1"), ("b", "2")], [("a", "1.5"), ("b", "2")], [("a", "3"), ("c", "4")])
            )
        ]
        t_uris = [upload_exports(rehearsal.s3, e.parents[2], [e])[0] for e in t_exports]
        first = rehearsal.ok("sync", "--table", "t", *t_uris[:2])
        assert "schema detected" in first and "drift adopted (qty)" in first, first
        second = rehearsal.ok("sync", "--table", "t", t_uris[2])
        assert "schema detected" not in second and "drift" not in second, second
        staged = iceberg_table(rehearsal.catalog, endpoint, f"{DATABASES[0]}.t")
        assert str(staged.schema().find_field("qty").field_type) == "decimal(38, 1)"
        kept = json.loads(staged.properties["dynamodb-lakehouse.schema"])  # no Spark needed
        assert kept["attributes"]["qty"]["type"] == "decimal(38,1)"
        final_t = iceberg_table(rehearsal.catalog, endpoint, f"{DATABASES[1]}.t").scan().to_arrow()
        assert sorted(
            zip(final_t["id"].to_pylist(), map(str, final_t["qty"].to_pylist()), strict=True)
        ) == [
            ("a", "3.0"),
            ("c", "4.0"),
        ]

        # What failed on EMR fails here too. The catalog holds no views, as Glue's:
        code, output = rehearsal.submit(
            emr.spark_parameters(
                rehearsal.archive, WAREHOUSE, rehearsal.deps, databases=DATABASES, region=REGION
            ),
            "query",
            f"create view {DATABASES[0]}.any_view as select 1 as one",
        )
        assert code != 0 and "not supported by catalog" in output, output
        # The next two are decided by the parameters before Spark starts, and are checked
        # without a JVM: the driver's first import, and the driver's classpath.
        # The packages come from the archive alone: without it, the driver's first import fails.
        params = emr.spark_parameters(rehearsal.archive, WAREHOUSE, rehearsal.deps, region=REGION)
        code, output = rehearsal.driver_import(params, "ingestion.cli")
        assert code == 0, output
        without_deps = emr.spark_parameters(rehearsal.archive, WAREHOUSE, region=REGION)
        code, output = rehearsal.driver_import(without_deps, "ingestion.cli")
        assert code != 0 and "No module named" in output, output[-2000:]
        # Iceberg's jar reaches the driver only as a spark-submit parameter: without it, the
        # class the profile names for the catalog is in no jar of the driver's classpath.
        profile = yaml.safe_load((ROOT / "profiles.yml").read_text())["dynamodb_lakehouse"]
        catalog_class = profile["outputs"]["rehearsal"]["server_side_parameters"][
            "spark.sql.catalog.lake"
        ]
        assert catalog_class.startswith("org.apache.iceberg")
        jars_given = f"--conf spark.jars={emr.jars(rehearsal.archive)} "
        without_jar = params.replace(jars_given, "")
        assert without_jar != params
        assert rehearsal.driver_loads(params, catalog_class)
        assert not rehearsal.driver_loads(without_jar, catalog_class)
        # So does the decoder's (decision 0013): beside the archive, named in spark.jars.
        assert rehearsal.driver_loads(params, item_decoder.DECODER_CLASS)
        assert not rehearsal.driver_loads(without_jar, item_decoder.DECODER_CLASS)
    assert os.environ.get("LAKEHOUSE_TARGET", "local") == "local"  # the test's own is untouched
