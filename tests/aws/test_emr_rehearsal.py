"""The EMR Serverless job, rehearsed on this machine as EMR runs it (tests/aws/emr_rehearsal.py
says how each step is rehearsed and what stands in for Glue, S3 and EMR's image).

The job is built as ``emr submit`` builds it (project.zip, main.py, the dependency archive for
this machine's architecture), uploaded to a local S3 endpoint (moto's server: a test double for
AWS only), and every run starts in a fresh folder, as every EMR job run starts in a fresh
container. Three job runs: one of every step whose point needs no run of its own
(``rehearsal/steps.py`` runs them in one driver, each a command of the job's own entry point: a
full export and an incremental chain synced, the table maintained, its status read, doctor's
probe, verify, a table whose types are detected, and a view the catalog refuses, as Glue's does);
one where the executors lack the project (broken parameters); one in a fresh folder that finds
the detected types in the lakehouse, not on a job's disk. The final table is read back with
pyiceberg and compared with what the export files say; two broken jobs decided by the parameters
alone are checked without a JVM (no dependency archive; no Iceberg jar).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sqlite3
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import emr_rehearsal
import local_s3
import pytest
import yaml
from reference import expected, same
from rehearsal import steps as steps_entry
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
STEPS = Path(steps_entry.__file__)  # the entry point of a job run of several steps


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

    def parameters(self) -> str:
        """The job parameters the project sends (``emr.spark_parameters``)."""
        return emr.spark_parameters(
            self.archive, WAREHOUSE, self.deps, databases=DATABASES, region=REGION
        )

    def submit(self, parameters: str, *arguments: str) -> tuple[int, str]:
        done = self._run(parameters, self.entry, list(arguments))
        return done.returncode, done.stderr[-3000:] + "\n--- stdout ---\n" + done.stdout[-4000:]

    def steps(self, *steps: tuple[str, list[str], bool]) -> dict[str, str]:
        """One job run of ``steps`` (name, the command's arguments, whether it should fail), on
        the parameters the project sends, through ``rehearsal/steps.py``: each step's output
        (stdout, then stderr), by name. A step whose outcome is not the expected one fails the
        test with its name and its output."""
        wanted = [{"name": n, "arguments": a, "fails": f} for n, a, f in steps]
        done = self._run(self.parameters(), STEPS, [json.dumps(wanted)])
        return checked_steps(wanted, done)

    def _run(
        self, parameters: str, entry: Path, arguments: list[str]
    ) -> subprocess.CompletedProcess[str]:
        job = self.job(parameters)
        # No region but the job parameters': EMR injects none. Every AWS endpoint of the
        # job's Python is the local one (moto's server).
        stand_ins = {
            **local_s3.CREDENTIALS,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ENDPOINT_URL_S3": self.endpoint,
            "LAKEHOUSE_REHEARSAL_CATALOG": str(self.catalog),
        }
        return emr_rehearsal.run(job, entry, arguments, self.spark_home, stand_ins, self.master)

    def ok(self, *arguments: str) -> str:
        code, output = self.submit(self.parameters(), *arguments)
        assert code == 0, f"{' '.join(arguments)} failed:\n{output}"
        return output


def checked_steps(
    wanted: list[dict[str, Any]], done: subprocess.CompletedProcess[str]
) -> dict[str, str]:
    """Each step's output by name, once every step of ``wanted`` ran and ended as expected;
    else an AssertionError naming the first that did not, with its output."""
    outputs = step_outputs(done.stdout, done.stderr)
    for step in wanted:
        name = step["name"]
        if name not in outputs or outputs[name][0] is None:
            raise AssertionError(
                f"step {name!r} never ran or never ended (the run exited "
                f"{done.returncode}):\n{done.stderr[-3000:]}"
            )
        code, output = outputs[name]
        if bool(code) != step["fails"]:
            expected = "fail" if step["fails"] else "succeed"
            raise AssertionError(
                f"step {name!r} ({' '.join(step['arguments'])}) exited {code}, expected to "
                f"{expected}:\n{output[-5000:]}"
            )
    assert done.returncode == 0, done.stderr[-3000:]
    return {name: output for name, (_, output) in outputs.items()}


def step_outputs(stdout: str, stderr: str) -> dict[str, tuple[int | None, str]]:
    """Each step's exit status (None: it never ended) and output, read between the markers
    ``rehearsal/steps.py`` prints on both streams."""
    found: dict[str, tuple[int | None, str]] = {}
    for stream in (stdout, stderr):
        for part in stream.split(f"{steps_entry.MARK} start ")[1:]:
            name, _, rest = part.partition("\n")
            body, marker, end = rest.partition(f"{steps_entry.MARK} end {name} ")
            code = int(end.split("\n", 1)[0]) if marker else None
            _, before = found.get(name, (None, ""))
            found[name] = (code, before + body)
    return found


def upload_exports(s3, out: Path, folders: list[Path]) -> list[str]:
    for path in sorted(out.rglob("*")):
        if path.is_file():
            s3.put_object(
                Bucket=BUCKET,
                Key=f"exports/{path.relative_to(out).as_posix()}",
                Body=path.read_bytes(),
            )
    return [f"s3://{BUCKET}/exports/{f.relative_to(out).as_posix()}" for f in folders]


def test_a_step_of_the_job_run_that_went_wrong_is_named() -> None:
    """The steps' outputs read apart; the first step with an outcome it did not expect, or with
    no end (its JVM died), fails the rehearsal by its name and output."""

    def framed(*parts: tuple[str, str, int | None]) -> str:
        mark = steps_entry.MARK
        return "".join(
            f"{mark} start {n}\n{text}\n" + (f"{mark} end {n} {c}\n" if c is not None else "")
            for n, text, c in parts
        )

    wanted = [
        {"name": "sync", "arguments": ["sync"], "fails": False},
        {"name": "view", "arguments": ["query", "create view v"], "fails": True},
    ]
    ok = subprocess.CompletedProcess(
        [],
        0,
        framed(("sync", "synced", 0), ("view", "", 1)),
        framed(("sync", "", 0), ("view", "no views", 1)),
    )
    outputs = checked_steps(wanted, ok)
    assert "synced" in outputs["sync"] and "no views" in outputs["view"]
    wrong = subprocess.CompletedProcess([], 1, framed(("sync", "synced", 0), ("view", "", 0)), "")
    with pytest.raises(AssertionError, match="step 'view' .* exited 0, expected to fail"):
        checked_steps(wanted, wrong)
    died = subprocess.CompletedProcess([], 134, framed(("sync", "half", None)), "JVM died")
    with pytest.raises(AssertionError, match="step 'sync' never ran or never ended"):
        checked_steps(wanted, died)


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

        # One job run of every step whose point needs no run of its own (a JVM start on the
        # cluster costs half a minute): ingest, then dbt run + dbt test in a catalog without
        # views, maintain, status, doctor's probe, verify, the first run of `t`; and what
        # failed on EMR fails here too: the catalog holds no views, as Glue's.
        out = rehearsal.steps(
            ("sync orders", ["sync", "--table", "orders", full_uri, *chain_uris], False),
            ("maintain", ["maintain", "--table", "orders"], False),
            ("status", ["status"], False),
            ("doctor", ["doctor", "--in-job"], False),
            ("verify", ["verify", "--table", "orders", full_uri], False),
            ("sync t", ["sync", "--table", "t", *t_uris[:2]], False),
            (
                "create view",
                ["query", f"create view {DATABASES[0]}.any_view as select 1 as one"],
                True,
            ),
        )
        assert "orders" in out["status"]
        # What `doctor --aws --probe` runs on the application: the job's Python with the
        # archive's dbt, Iceberg from spark.jars, both databases, a scratch table, and a call to
        # each AWS service the job's Python reaches, in the region the parameters give it.
        probe = out["doctor"]
        for line in (
            "✓ dbt: dbt-core",
            "✓ iceberg: Apache Iceberg 1.10.2",
            "✓ decoder: ",
            "✓ warehouse: created",
        ):
            assert line in probe, probe
        for service in ("dynamodb", "glue", "s3", "cloudwatch"):
            assert f"✓ reach {service}: {endpoint} answered" in probe, probe
        # verify against the full export, whose keys the chain changed after its instant: the
        # second pass runs the project's Python on the executors, which import it from the
        # archives the job parameters give them (not from the driver's environment).
        assert expected_orders([full]) != expected_orders([full, *chain])  # keys changed since
        verified = out["verify"]
        assert "EQUAL in" in verified and "NOT EQUAL" not in verified, verified
        first = out["sync t"]
        assert "schema detected" in first and "drift adopted (qty)" in first, first
        assert "not supported by catalog" in out["create view"], out["create view"]
        assert_final_orders(rehearsal.catalog, endpoint, expected_orders([full, *chain]))

        # Runs of their own, through the job's main.py. The parameters as they were, the
        # executors given PYSPARK_PYTHON alone: on EMR the second pass failed on every such run.
        sent = rehearsal.parameters()
        driver_only = re.sub(r" --conf spark\.executorEnv\.(?!PYSPARK_PYTHON=)\S+", "", sent)
        assert driver_only.count("spark.executorEnv.") == 1
        code, output = rehearsal.submit(driver_only, "verify", "--table", "orders", full_uri)
        assert code != 0 and "No module named 'ingestion'" in output, output[-2000:]
        with sqlite3.connect(rehearsal.catalog) as catalog:
            spaces = {n for (n,) in catalog.execute("select table_namespace from iceberg_tables")}
        assert spaces == set(DATABASES), spaces  # nothing under the default names

        # A later run of `t`, in a fresh folder (as every EMR job run starts).
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
