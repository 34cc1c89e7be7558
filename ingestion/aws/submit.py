"""``emr submit``: a command of this project run on Amazon EMR. The project is packaged
(``packaging``), uploaded under ``s3://CODE/<digest>/`` with the dependency archive of the
application's architecture (unless the application runs a custom image or a packed virtualenv),
started as an EMR Serverless job run or an EMR on EC2 step (``emr``), and waited for.

``dry_run`` builds the same request and prints it; nothing is uploaded or started.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingestion.aws import emr, packaging
from ingestion.config import settings
from ingestion.sources.locations import s3_client
from ingestion.sources.s3_uri import parse_s3_uri


@dataclass(frozen=True)
class Submission:
    arguments: list[str]  # the ddb-lakehouse command to run, e.g. ["sync", "--table", "orders"]
    code: str  # s3://BUCKET/PREFIX to upload to
    application_id: str | None = None  # EMR Serverless, or
    cluster_id: str | None = None  # EMR on EC2
    role_arn: str | None = None
    warehouse: str | None = None
    custom_image: bool = False
    venv_archive: str | None = None
    architecture: str = "x86_64"
    region: str | None = None  # the job's; default: this machine's AWS configuration's


@dataclass(frozen=True)
class _Prepared:
    built: packaging.Package
    bucket: str
    prefix: str
    deps: tuple[Path, str] | None  # (local archive, its s3:// location)
    request: dict[str, Any]  # StartJobRun, or the cluster step


def _check(s: Submission) -> None:
    if not s.arguments:
        raise emr.EmrError("give the command to run after --, e.g. -- sync --table orders ...")
    if s.application_id and (not s.role_arn or not s.warehouse):
        raise emr.EmrError("EMR Serverless needs --role-arn and --warehouse")
    if not s.application_id and not s.warehouse:
        raise emr.EmrError(
            "an EMR on EC2 step needs --warehouse (s3://BUCKET/PREFIX of the tables)"
        )


def region(s: Submission) -> str:
    """The region the job runs in and is given (``AWS_REGION``): ``--region``, else this
    machine's AWS configuration's; the EMR clients are built in it."""
    import boto3

    found = s.region or settings.aws_region() or boto3.session.Session().region_name
    if not found:
        raise emr.EmrError("no region: pass --region or set AWS_REGION")
    return str(found)


def _prepare(s: Submission, arch: str) -> _Prepared:
    """The package built and the request that runs it (nothing sent)."""
    bucket, prefix = parse_s3_uri(s.code)
    work = settings.lakehouse_home() / "dist"  # what submit builds, then uploads
    built = packaging.package(work)
    deps = None
    if not s.custom_image and not s.venv_archive:
        path, key = packaging.dependencies(work, arch)
        deps = (path, packaging.deps_location(bucket, prefix, arch, key))
    deps_uri = deps[1] if deps else None
    entry, archive = packaging.code_locations(built, bucket, prefix)
    name = "ddb-lakehouse " + " ".join(s.arguments[:3])
    assert s.warehouse is not None
    if s.application_id:
        parameters = emr.spark_parameters(
            archive,
            s.warehouse,
            deps_uri,
            s.venv_archive,
            watch=emr.is_small(s.arguments),
            region=region(s),
        )
        assert s.role_arn is not None
        request = emr.job_run_request(
            s.application_id, s.role_arn, entry, s.arguments, parameters, name
        )
    else:
        request = emr.step_request(
            entry, s.arguments, archive, name, s.warehouse, region(s), deps_uri
        )
    return _Prepared(built, bucket, prefix, deps, request)


def dry_run(s: Submission) -> str:
    """The exact request a submission would send, as text; nothing uploaded or started."""
    _check(s)
    p = _prepare(s, s.architecture)
    if s.application_id:
        shown = "StartJobRun " + json.dumps(p.request, indent=2)
    else:
        steps = {"JobFlowId": s.cluster_id, "Steps": [p.request]}
        shown = "AddJobFlowSteps " + json.dumps(steps, indent=2)
    return shown + f"\n(dry run: nothing uploaded to s3://{p.bucket}/{p.prefix}, nothing started)"


def submit(s: Submission, report: Callable[[str], Any], wait: bool, poll: float) -> None:
    """Package, upload, start; then wait for the end unless ``wait`` is False (a failed run
    raises ``EmrError``)."""
    import boto3

    _check(s)
    arch = s.architecture
    client = None
    if s.application_id:
        client = boto3.client("emr-serverless", region_name=region(s))
        label, arch = emr.check_release(client, s.application_id)
        report(f"application {s.application_id}: {label}, {arch}{emr.release_note(label)}")
    p = _prepare(s, arch)
    s3 = s3_client()
    _entry, archive = packaging.upload(s3, p.built, p.bucket, p.prefix)
    report(f"uploaded {archive}")
    if p.deps and packaging.upload_dependencies(s3, *p.deps):
        report(f"uploaded {p.deps[1]} ({p.deps[0].stat().st_size / 1e6:.0f} MB)")
    if s.application_id:
        assert client is not None
        run_id = emr.start_serverless(client, p.request)
        what = f"job run {run_id} on application {s.application_id}"
        state = emr.serverless_state(client, s.application_id, run_id)
        done, failed = emr.DONE_SERVERLESS, emr.FAILED_SERVERLESS
    else:
        assert s.cluster_id is not None
        client = boto3.client("emr", region_name=region(s))
        step_id = emr.add_step(client, s.cluster_id, p.request)
        what = f"step {step_id} on cluster {s.cluster_id}"
        state = emr.step_state(client, s.cluster_id, step_id)
        done, failed = emr.DONE_STEP, emr.FAILED_STEP
    report(what)
    if wait:
        emr.wait(state, done, failed, what, poll, report)
