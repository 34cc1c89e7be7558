"""AWS commands: ``emr`` (package, submit), ``register-glue``, and ``doctor`` (this machine,
and with ``--aws`` an AWS account)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ingestion.aws import account_doctor, deployment, glue, job_python, packaging, submit
from ingestion.cli import output
from ingestion.cli.arguments import add_table_selection, options_from, selected_tables
from ingestion.config import names
from ingestion.project.doctor import Check


def register(sub: argparse._SubParsersAction) -> None:
    _register_doctor(sub)
    _register_deploy(sub)
    p = sub.add_parser(
        "register-glue",
        help="register (or move) the final tables in the AWS Glue catalog for Athena",
    )
    add_table_selection(p)
    p.add_argument("--database", default=names.FINAL, help=f"Glue database (default {names.FINAL})")
    p.add_argument("--glue-endpoint", help="Glue endpoint URL (default: AWS's)")
    p.set_defaults(run=run_register_glue)

    p = sub.add_parser("emr", help="run a command of this project on Amazon EMR")
    p.set_defaults(run=run_emr)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    a = actions.add_parser(
        "package",
        help="build project.zip, the decoder's jar, main.py, the dependency archives and the "
        "Lambda function's zip",
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
    a.add_argument(
        "--region",
        help="the job's AWS region, given to it as AWS_REGION (default: your AWS configuration's)",
    )
    a.add_argument("--poll", type=float, default=30.0, help="seconds between status calls")
    a.add_argument("--no-wait", action="store_true", help="submit and return")
    a.add_argument(
        "--dry-run",
        action="store_true",
        help="print the exact request (StartJobRun, or the cluster step) and send nothing",
    )
    a.add_argument(
        "arguments",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND ARGS",
        help="the ddb-lakehouse command the job runs, after --, e.g. -- sync --table books",
    )


def run_register_glue(args: argparse.Namespace) -> int:
    registered = glue.register_tables(
        selected_tables(args), args.database, args.glue_endpoint, output.Console().line
    )
    for done in registered:
        print(
            f"{done.table}: {'registered' if done.created else 'moved'} to {done.metadata_location}"
        )
    return 0


def run_emr(args: argparse.Namespace) -> int:
    if args.action == "package":
        return run_package(args)
    arguments = [a for a in args.arguments if a != "--"]
    request = options_from(submit.Submission, args, arguments=arguments)
    if args.dry_run:
        print(submit.dry_run(request))
        return 0
    submit.submit(request, output.Console().line, wait=not args.no_wait, poll=args.poll)
    return 0


def run_package(args: argparse.Namespace) -> int:
    """Everything a deploy uploads, in one folder, with sizes."""
    arches = list(job_python.ARCHITECTURES) if args.architecture == "all" else [args.architecture]
    packaging.package_for_deploy(args.out, arches, output.Console().line)
    return 0


def _register_deploy(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "deploy", help="render the CloudFormation template from the table configuration"
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    a = actions.add_parser(
        "render",
        help="write deploy/template.yaml: each table's resources by its cadence (stream or daily)",
    )
    a.add_argument(
        "--out", type=Path, help="where to write it (default: deploy/template.yaml; - prints it)"
    )
    p.set_defaults(run=run_deploy_render)


def _register_doctor(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="check what the project needs: Java, jars, catalog, dbt, disk; --aws: the account",
    )
    p.add_argument(
        "--aws",
        action="store_true",
        help="also check the AWS account: credentials, the application, each table's "
        "point-in-time recovery and stream, the Glue databases (read-only calls)",
    )
    p.add_argument("--application-id", help="the EMR Serverless application that runs the jobs")
    p.add_argument("--region", help="AWS region (default: your AWS configuration's)")
    p.add_argument(
        "--glue-database",
        nargs="+",
        default=[names.STAGING, names.FINAL],
        metavar="NAME",
        help=f"the Glue databases of the tables (default: {names.STAGING} {names.FINAL})",
    )
    p.add_argument(
        "--bucket",
        help="with --aws: the data bucket (the template's BucketName): its KMS key, and with "
        "--role-arn whether the job role may use it",
    )
    p.add_argument(
        "--probe",
        action="store_true",
        help="with --aws: run the checks inside one small job run on the application (its "
        "Python, dbt, Iceberg, both databases, a scratch table); its cost is printed first",
    )
    for flag, what in (
        ("--code", "s3://BUCKET/PREFIX to upload the job's code to (as emr submit)"),
        ("--role-arn", "the job role (as emr submit); with --bucket, its use of the bucket's key"),
        ("--warehouse", "s3://BUCKET/PREFIX of the tables (as emr submit)"),
    ):
        p.add_argument(flag, help=f"--probe: {what}")
    p.add_argument("--dry-run", action="store_true", help="--probe: print the request only")
    p.add_argument("--in-job", action="store_true", help="the checks a --probe job runs")
    p.set_defaults(run=run_doctor)


def run_doctor(args: argparse.Namespace) -> int:
    """One line a check; exit 1 when any fails."""
    from ingestion.project.doctor import job_checks, local_checks

    console = output.Console()
    if args.dry_run and not args.probe:
        raise submit.emr.EmrError("--dry-run goes with --probe (it prints the probe's request)")
    if args.in_job:
        from ingestion.spark import spark_config

        checks = job_checks(spark_config.build_spark("doctor"))
    else:
        checks = local_checks()
    if args.aws or args.probe:  # the probe needs the account's checks to pass first
        checks += _account_checks(args, console.line)
    for check in checks:
        console.line(check.line())
    failed = [c for c in checks if not c.ok]
    console.line(f"{len(checks) - len(failed)} of {len(checks)} checks passed")
    return 1 if failed else 0


def _account_checks(args: argparse.Namespace, report: Callable[[str], Any]) -> list[Check]:
    from ingestion.dynamodb.tables import load_tables

    tables = tuple(load_tables().values())
    account = account_doctor.Account(
        tables,
        args.application_id,
        tuple(args.glue_database),
        args.region,
        args.bucket,
        args.role_arn,
    )
    checks = [] if args.dry_run else account_doctor.aws_checks(account)
    if not args.probe or not all(c.ok for c in checks):
        return checks
    if not (args.application_id and args.code and args.role_arn and args.warehouse):
        raise submit.emr.EmrError(
            "--probe needs --application-id, --code, --role-arn and --warehouse (as emr submit)"
        )
    probe = submit.Submission(
        arguments=["doctor", "--in-job"],
        code=args.code,
        application_id=args.application_id,
        role_arn=args.role_arn,
        warehouse=args.warehouse,
        region=args.region,
    )
    report(account_doctor.PROBE_COST)
    if args.dry_run:
        report(submit.dry_run(probe))
        return checks
    return [*checks, account_doctor.probe(probe, report)]


def run_deploy_render(args: argparse.Namespace) -> int:
    """Render, check every schedule's input against StartJobRun's shape, write."""
    from ingestion.config import settings
    from ingestion.dynamodb.tables import load_tables

    tables = list(load_tables().values())
    template = deployment.render(tables)
    deployment.check(template)
    text = deployment.to_yaml(template)
    console = output.Console()
    if str(args.out) == "-":
        console.line(text.rstrip("\n"))
        return 0
    out = args.out or settings.project_dir() / "deploy" / "template.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    streamed = [t.name for t in tables if t.cadence == "stream"]
    daily = [t.name for t in tables if t.cadence != "stream"]
    split = [t.name for t in tables if t.verify != "off" and not deployment.verified(t)]
    console.line(
        f"wrote {out}: {len(tables)} tables; one watch for {', '.join(streamed) or 'none'}; "
        f"daily exports for {', '.join(daily) or 'none'}; verified against DynamoDB: "
        + (", ".join(f"{t.name} {t.verify}" for t in tables if deployment.verified(t)) or "none")
        + (
            f"; not verified: {', '.join(split)} (a single-table design: docs/known-limits.md)"
            if split
            else ""
        )
    )
    return 0
