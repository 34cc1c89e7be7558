"""AWS commands: ``emr`` (package, submit) and ``register-glue``."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from ingestion.aws import emr, glue, job_python, packaging
from ingestion.cli.arguments import add_table_selection, selected_tables
from ingestion.config import names, settings
from ingestion.sources.locations import s3_client
from ingestion.sources.s3_uri import parse_s3_uri
from ingestion.spark import spark_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "register-glue",
        help="register (or move) the final tables in the AWS Glue catalog for Athena",
    )
    add_table_selection(p)
    p.add_argument("--database", default=names.FINAL, help="Glue database (default lakehouse)")
    p.add_argument("--glue-endpoint", help="Glue endpoint URL (default: AWS's)")
    p.set_defaults(run=run_register_glue)

    p = sub.add_parser("emr", help="run a command of this project on Amazon EMR")
    p.set_defaults(run=run_emr)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    a = actions.add_parser(
        "package",
        help="build project.zip, main.py, the dependency archives and the Lambda function's zip",
    )
    a.add_argument("--out", type=Path, default=Path("dist"), help="folder (default dist/)")
    a.add_argument(
        "--architecture",
        choices=["all", *job_python.ARCHITECTURES],
        default="all",
        help="dependency archives to build (default all: x86_64 and arm64)",
    )
    a = actions.add_parser(
        "submit",
        help="package, upload, run `ddb-lakehouse ARGS...` on EMR Serverless or an EMR cluster",
    )
    a.add_argument("--code", required=True, metavar="s3://BUCKET/PREFIX", help="where to upload")
    where = a.add_mutually_exclusive_group(required=True)
    where.add_argument("--application-id", help="EMR Serverless application")
    where.add_argument("--cluster-id", help="EMR on EC2 cluster (adds a step)")
    a.add_argument("--role-arn", help="job execution role (EMR Serverless)")
    a.add_argument("--warehouse", metavar="s3://BUCKET/PREFIX", help="Iceberg warehouse on S3")
    python = a.add_mutually_exclusive_group()
    python.add_argument(
        "--custom-image",
        action="store_true",
        help="the application runs an image built from deploy/Dockerfile: no dependency archive",
    )
    python.add_argument(
        "--venv-archive", metavar="s3://...", help="a packed virtualenv with its own interpreter"
    )
    a.add_argument(
        "--architecture",
        choices=list(job_python.ARCHITECTURES),
        default="x86_64",
        help="of a cluster, or of the application in a --dry-run (a real submission asks it)",
    )
    a.add_argument("--poll", type=float, default=30.0, help="seconds between status calls")
    a.add_argument("--no-wait", action="store_true", help="submit and return")
    a.add_argument(
        "--dry-run",
        action="store_true",
        help="print the exact request (StartJobRun, or the cluster step) and send nothing",
    )
    a.add_argument("arguments", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS")


def run_register_glue(args: argparse.Namespace) -> int:
    tables = selected_tables(args)
    spark = spark_config.build_spark("register-glue")
    catalog = glue.glue_catalog(args.glue_endpoint)
    for table in tables:
        if not spark.catalog.tableExists(names.final_table(table.name)):
            print(f"{table.name}: no final table yet, skipped")
            continue
        location = glue.current_metadata_location(spark, names.FINAL, table.name)
        done = glue.register(catalog, args.database, table.name, location)
        print(f"{done.table}: {'registered' if done.created else 'moved'} to {location}")
    return 0


def run_emr(args: argparse.Namespace) -> int:
    if args.action == "package":
        return run_package(args)
    arguments = [a for a in args.arguments if a != "--"]
    if not arguments:
        raise emr.EmrError("give the command to run after --, e.g. -- sync --table orders ...")
    if args.application_id and (not args.role_arn or not args.warehouse):
        raise emr.EmrError("EMR Serverless needs --role-arn and --warehouse")
    if not args.application_id and not args.warehouse:
        raise emr.EmrError(
            "an EMR on EC2 step needs --warehouse (s3://BUCKET/PREFIX of the tables)"
        )
    bucket, prefix = parse_s3_uri(args.code)
    import boto3

    client = None
    arch = args.architecture
    if args.application_id and not args.dry_run:
        client = boto3.client("emr-serverless")
        label, arch = emr.check_release(client, args.application_id)
        print(f"application {args.application_id}: {label}, {arch}")
    work = settings.lakehouse_home() / "dist"  # what submit builds, then uploads
    built = packaging.package(work)
    deps = None
    if not args.custom_image and not args.venv_archive:
        path, key = packaging.dependencies(work, arch)
        deps = (path, packaging.deps_location(bucket, prefix, arch, key))
    deps_uri = deps[1] if deps else None
    entry, archive = packaging.code_locations(built, bucket, prefix)
    name = "ddb-lakehouse " + " ".join(arguments[:3])
    if args.application_id:
        parameters = emr.spark_parameters(
            archive, args.warehouse, deps_uri, args.venv_archive, watch=emr.is_watch(arguments)
        )
        request = emr.job_run_request(
            args.application_id, args.role_arn, entry, arguments, parameters, name
        )
    else:
        step = emr.step_request(entry, arguments, archive, name, args.warehouse, deps_uri)
    if args.dry_run:
        import json

        if args.application_id:
            print("StartJobRun " + json.dumps(request, indent=2))
        else:
            print("AddJobFlowSteps " + json.dumps({"JobFlowId": args.cluster_id, "Steps": [step]}, indent=2))  # fmt: skip
        print(f"(dry run: nothing uploaded to s3://{bucket}/{prefix}, nothing started)")
        return 0
    s3 = s3_client()
    packaging.upload(s3, built, bucket, prefix)
    print(f"uploaded {archive}")
    if deps and packaging.upload_dependencies(s3, *deps):
        print(f"uploaded {deps[1]} ({deps[0].stat().st_size / 1e6:.0f} MB)")
    if args.application_id:
        assert client is not None
        run_id = emr.start_serverless(client, request)
        what = f"job run {run_id} on application {args.application_id}"
        state = emr.serverless_state(client, args.application_id, run_id)
        done, failed = emr.DONE_SERVERLESS, emr.FAILED_SERVERLESS
    else:
        client = boto3.client("emr")
        step_id = emr.add_step(client, args.cluster_id, step)
        what = f"step {step_id} on cluster {args.cluster_id}"
        state = emr.step_state(client, args.cluster_id, step_id)
        done, failed = emr.DONE_STEP, emr.FAILED_STEP
    print(what)
    if not args.no_wait:
        emr.wait(state, done, failed, what, args.poll, lambda line: print(line, flush=True))
    return 0


def run_package(args: argparse.Namespace) -> int:
    """Everything a deploy uploads, in one folder, with sizes."""
    built = packaging.package(args.out)
    shutil.copyfile(built.entry_point, args.out / "main.py")
    function = packaging.package_lambda(args.out)
    print(f"job: {built.archive} ({built.digest}) and {args.out / 'main.py'}")
    arches = list(job_python.ARCHITECTURES) if args.architecture == "all" else [args.architecture]
    for arch in arches:
        print(f"dependencies for {arch}: building (pip, CPython {job_python.PYTHON_VERSION})...")
        path, _ = packaging.dependencies(args.out, arch)
        print(f"dependencies for {arch}: {path} ({path.stat().st_size / 1e6:.1f} MB)")
    print(f"Lambda function: {function} (handler {packaging.LAMBDA_HANDLER})")
    return 0
