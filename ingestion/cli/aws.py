"""AWS commands: ``emr`` (package, submit), ``register-glue``, and ``doctor`` (this machine,
and with ``--aws`` an AWS account)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ingestion.aws import doctor, glue, job_python, packaging, submit
from ingestion.cli import output
from ingestion.cli.arguments import add_table_selection, options_from, selected_tables
from ingestion.config import names


def register(sub: argparse._SubParsersAction) -> None:
    _register_doctor(sub)
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
        help="the Glue databases of the tables (default: staging lakehouse)",
    )
    p.set_defaults(run=run_doctor)


def run_doctor(args: argparse.Namespace) -> int:
    """One line a check; exit 1 when any fails."""
    from ingestion.dynamodb.tables import load_tables
    from ingestion.jobs.doctor import local_checks

    console = output.Console()
    checks = local_checks()
    if args.aws:
        account = doctor.Account(
            tuple(load_tables().values()),
            args.application_id,
            tuple(args.glue_database),
            args.region,
        )
        checks += doctor.aws_checks(account)
    for check in checks:
        console.line(check.line())
    failed = [c for c in checks if not c.ok]
    console.line(f"{len(checks) - len(failed)} of {len(checks)} checks passed")
    return 1 if failed else 0
