"""What the EMR job runs, packed for S3: the project, its entry point, its Python packages.

``project.zip`` holds the ``ingestion`` package and the dbt project (``dbt_project.yml``,
``profiles.yml``, ``models/``, ``macros/``, ``schemas/``, ``conf/``); ``main.py`` is the entry
point; ``deps-<arch>.tar.gz`` the packages for the release's Python 3.11 (``job_python``);
``dynamodb-lakehouse-decoder.jar`` staging's decoder (decision 0013), compiled from ``java/``, named
in the job's ``spark.jars``. Each goes to S3 under a name derived from its content, so a changed
project never reuses an old upload and an unchanged one is not uploaded again. The Lambda function's
zip is built here too.
"""

from __future__ import annotations

import hashlib
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingestion.aws import emr, job_python
from ingestion.config import settings
from ingestion.merge.model_tests import migrate_models
from ingestion.sources.s3_uri import parse_s3_uri
from ingestion.spark import jars

PROJECT_PARTS = ("ingestion", "models", "macros", "schemas", "conf")
PROJECT_FILES = ("dbt_project.yml", "profiles.yml")
LAMBDA_HANDLER = "ingestion.stream_writer.handler"
LAMBDA_FILES = (
    "ingestion/__init__.py",
    "ingestion/stream_writer.py",
    "ingestion/config/__init__.py",
    "ingestion/config/errors.py",
    "ingestion/sources/__init__.py",
    "ingestion/sources/s3_uri.py",
    "ingestion/sources/change_file_writer.py",
)


@dataclass(frozen=True)
class Package:
    archive: Path  # project.zip
    entry_point: Path  # ingestion/main.py
    # Of the archive and the decoder: names the upload, so that a changed project never reuses
    # an old one.
    digest: str
    decoder: Path  # the decoder's jar, uploaded beside the archive


def package(out: Path, root: Path | None = None) -> Package:
    """Zip the package and the dbt project (sorted, fixed timestamps: same files, same zip)."""
    root = root or settings.project_dir()
    migrate_models(root)  # the job parses what it is given: a renamed test under its new name
    out.mkdir(parents=True, exist_ok=True)
    archive = out / "project.zip"
    files = [root / name for name in PROJECT_FILES]
    for part in PROJECT_PARTS:
        files += [
            p for p in (root / part).rglob("*") if p.is_file() and "__pycache__" not in p.parts
        ]
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for path in sorted(files):
            info = zipfile.ZipInfo(
                path.relative_to(root).as_posix(), date_time=(2020, 1, 1, 0, 0, 0)
            )
            info.external_attr = 0o644 << 16
            bundle.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)
    decoder = out / jars.DECODER_JAR
    compiled = jars.decoder_jar(root)
    shutil.copyfile(compiled, decoder)
    # The decoder by the digest of its source (its cached name), not its bytes: another JDK
    # build may write other bytes for the same classes, and the same project must reuse its
    # upload.
    digest = hashlib.sha256(archive.read_bytes() + b"\0" + compiled.name.encode()).hexdigest()[:16]
    return Package(archive, root / "ingestion" / "main.py", digest, decoder)


def lambda_key(root: Path | None = None) -> str:
    """The Lambda zip's key in the code bucket, named by a digest of the files it holds: a
    new version of the writer is a new key, which is what makes CloudFormation update the
    function (a zip uploaded again under the same key never reaches it)."""
    root = root or settings.project_dir()
    digest = hashlib.sha256()
    for name in LAMBDA_FILES:
        digest.update(name.encode() + b"\0" + (root / name).read_bytes() + b"\0")
    return f"{CODE_PREFIX}/stream_writer-{digest.hexdigest()[:16]}.zip"


# Where the template expects what ``make package`` builds, in the code bucket.
CODE_PREFIX = "dynamodb-lakehouse"


def package_lambda(out: Path, root: Path | None = None) -> Path:
    """The Lambda function's code: the writer, the S3 URI parser and the handler's stable path
    (``ingestion.stream_writer.handler``) only: standard library + boto3, which the Lambda
    runtime provides. Named as its key (``lambda_key``) names it."""
    root = root or settings.project_dir()
    out.mkdir(parents=True, exist_ok=True)
    archive = out / lambda_key(root).rsplit("/", 1)[1]
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name in LAMBDA_FILES:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            bundle.writestr(info, (root / name).read_bytes(), zipfile.ZIP_DEFLATED)
    return archive


def code_locations(built: Package, bucket: str, prefix: str) -> tuple[str, str]:
    """Where the package goes: (entry point URI, archive URI) under ``prefix/<digest>/``."""
    base = f"s3://{bucket}/{prefix.strip('/')}/{built.digest}"
    return f"{base}/main.py", f"{base}/project.zip"


def upload(s3: Any, built: Package, bucket: str, prefix: str) -> tuple[str, str]:
    """Upload the package (and the decoder beside it) under ``prefix/<digest>/``; return (entry
    point URI, archive URI)."""
    entry, archive = code_locations(built, bucket, prefix)
    s3.upload_file(str(built.archive), bucket, parse_s3_uri(archive).key)
    s3.upload_file(str(built.decoder), bucket, parse_s3_uri(emr.decoder_location(archive)).key)
    s3.upload_file(str(built.entry_point), bucket, parse_s3_uri(entry).key)
    return entry, archive


def deps_key(arch: str, root: Path | None = None) -> str:
    """What decides the dependency archive's content: requirements, pins, tags, Python."""
    facts = [arch, job_python.PYTHON_VERSION, *job_python.MANYLINUX]
    facts += job_python.requirements(root) + job_python.constraints()
    return hashlib.sha256("\n".join(facts).encode()).hexdigest()[:16]


def dependencies(out: Path, arch: str, root: Path | None = None) -> tuple[Path, str]:
    """``out/deps-<arch>.tar.gz``, built once per key; returns (path, key)."""
    key = deps_key(arch, root)
    archive = out / job_python.archive_name(arch)
    stamp = archive.with_name(archive.name + ".key")
    if not (archive.is_file() and stamp.is_file() and stamp.read_text() == key):
        job_python.build(out, arch, root)
        stamp.write_text(key)
    return archive, key


def deps_location(bucket: str, prefix: str, arch: str, key: str) -> str:
    return f"s3://{bucket}/{prefix.strip('/')}/deps/{key}/{job_python.archive_name(arch)}"


def upload_dependencies(s3: Any, archive: Path, uri: str) -> bool:
    """Upload the archive unless that very key is already there; True when uploaded."""
    bucket, key = parse_s3_uri(uri)
    try:
        s3.head_object(Bucket=bucket, Key=key)
        return False
    except s3.exceptions.ClientError:
        s3.upload_file(str(archive), bucket, key)
        return True


def package_for_deploy(out: Path, architectures: list[str], report: Callable[[str], Any]) -> None:
    """Everything a deploy uploads, in ``out``: the job (``project.zip`` and ``main.py``), the
    dependency archive of each architecture, and the Lambda function's zip; sizes reported."""
    built = package(out)
    shutil.copyfile(built.entry_point, out / "main.py")
    function = package_lambda(out)
    report(f"job: {built.archive} ({built.digest}), {built.decoder} and {out / 'main.py'}")
    for arch in architectures:
        report(f"dependencies for {arch}: building (pip, CPython {job_python.PYTHON_VERSION})...")
        path, _ = dependencies(out, arch)
        report(f"dependencies for {arch}: {path} ({path.stat().st_size / 1e6:.1f} MB)")
    report(
        f"Lambda function: {function} (handler {LAMBDA_HANDLER}): upload it to "
        f"s3://CODE/{lambda_key()}, the template's LambdaCodeKey"
    )
