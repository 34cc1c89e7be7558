"""AWS commands: ``emr`` (package, submit) and ``register-glue``."""

from __future__ import annotations

import argparse
from pathlib import Path

from ingestion.aws import emr, glue
from ingestion.cli.arguments import add_table_selection, selected_tables
from ingestion.config import names
from ingestion.lake import spark_config
from ingestion.sources.locations import s3_client
from ingestion.sources.s3_uri import parse_s3_uri


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
    a = actions.add_parser("package", help="build project.zip (package + dbt project)")
    a.add_argument("--out", type=Path, default=Path("dist"), help="folder (default dist/)")
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
    a.add_argument("--venv-archive", metavar="s3://...", help="packed virtualenv (venv-pack)")
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
        built = emr.package(args.out)
        function = emr.package_lambda(args.out)
        print(f"job: {built.archive} ({built.digest}) and {built.entry_point}")
        print(f"Lambda function: {function} (handler {emr.LAMBDA_HANDLER})")
        return 0
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
    built = emr.package(Path(".lakehouse-dist"))
    name = "ddb-lakehouse " + " ".join(arguments[:3])
    if args.dry_run:
        return print_dry_run(args, built, bucket, prefix, arguments, name)
    entry, archive = emr.upload(s3_client(), built, bucket, prefix)
    print(f"uploaded {archive}")
    import boto3

    if args.application_id:
        client = boto3.client("emr-serverless")
        print(
            f"application {args.application_id}: {emr.check_release(client, args.application_id)}"
        )
        parameters = emr.spark_parameters(archive, args.warehouse, args.venv_archive)
        run_id = emr.start_serverless(
            client, args.application_id, args.role_arn, entry, arguments, parameters, name
        )
        what = f"job run {run_id} on application {args.application_id}"
        state = emr.serverless_state(client, args.application_id, run_id)
        done, failed = emr.DONE_SERVERLESS, emr.FAILED_SERVERLESS
    else:
        client = boto3.client("emr")
        step_id = emr.add_step(
            client, args.cluster_id, entry, arguments, archive, name, args.warehouse
        )
        what = f"step {step_id} on cluster {args.cluster_id}"
        state = emr.step_state(client, args.cluster_id, step_id)
        done, failed = emr.DONE_STEP, emr.FAILED_STEP
    print(what)
    if not args.no_wait:
        emr.wait(state, done, failed, what, args.poll, lambda line: print(line, flush=True))
    return 0


def print_dry_run(
    args: argparse.Namespace, built: emr.Package, bucket: str, prefix: str, arguments: list[str],
    name: str,
) -> int:  # fmt: skip
    """The request ``emr submit`` would send, as JSON; nothing is uploaded or started."""
    import json

    entry, archive = emr.code_locations(built, bucket, prefix)
    if args.application_id:
        parameters = emr.spark_parameters(archive, args.warehouse, args.venv_archive)
        request = emr.job_run_request(
            args.application_id, args.role_arn, entry, arguments, parameters, name
        )
        print("StartJobRun " + json.dumps(request, indent=2))
    else:
        step = emr.step_request(entry, arguments, archive, name, args.warehouse)
        print(
            "AddJobFlowSteps "
            + json.dumps({"JobFlowId": args.cluster_id, "Steps": [step]}, indent=2)
        )
    print(f"(dry run: {built.archive} not uploaded to s3://{bucket}/{prefix}, nothing started)")
    return 0
