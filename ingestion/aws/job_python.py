"""The job's Python on EMR: the packages the project imports, one archive per architecture.

EMR 7.1 and later ship two Pythons, 3.9 (``python3``, Spark's default) and 3.11
(``/usr/bin/python3.11``), and neither has dbt. The project needs 3.11. So the job runs the
release's own 3.11 and finds its packages in ``deps-<arch>.tar.gz``, unpacked next to the driver
(``spark.archives ...#deps``) and put on ``PYTHONPATH``. The archive holds manylinux wheels for
CPython 3.11 installed with ``pip install --target``: no interpreter, so nothing in it depends on
how this machine's Python was built. Amazon Linux 2023 (EMR 7.x) has glibc 2.34: any wheel
tagged manylinux 2.17 to 2.34 runs there.

Decision: the archive holds no interpreter (``venv-pack`` of a Debian or macOS ``.venv`` brings
an interpreter that does not run on Amazon Linux). A custom image (``deploy/Dockerfile``) is the
alternative for teams that build images; ``emr submit --custom-image`` then sends no archive.
"""

from __future__ import annotations

import gzip
import importlib.metadata
import io
import re
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from pathlib import Path

from ingestion.config import settings
from ingestion.config.errors import LakehouseError

JOB_PYTHON = "/usr/bin/python3.11"
PYTHON_VERSION = "3.11"
# The architecture names EMR Serverless uses (GetApplication's `architecture`, lower case), and
# the machine names of their wheels.
ARCHITECTURES = {"x86_64": "x86_64", "arm64": "aarch64"}
MANYLINUX = ("manylinux2014", "manylinux_2_28", "manylinux_2_34")
# What EMR itself provides: its Spark (PySpark, Py4J) and its Iceberg.
PROVIDED = ("pyspark", "py4j", "snowpark-connect-deps-iceberg")


class PackagingError(LakehouseError):
    """The dependency archive could not be built."""


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def requirements(root: Path | None = None) -> list[str]:
    """The project's runtime dependencies (pyproject.toml) less what EMR provides. Extras are
    dropped: ``dbt-spark[session]`` would pull PySpark, which must be EMR's own."""
    project = tomllib.loads(((root or settings.project_dir()) / "pyproject.toml").read_text())
    wanted = []
    for requirement in project["project"]["dependencies"]:
        if _name(requirement) in PROVIDED:
            continue
        wanted.append(re.sub(r"\[[^\]]*\]", "", requirement))
    return wanted


def constraints() -> list[str]:
    """Every distribution installed here, pinned: the job gets the versions the tests ran."""
    pins = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name and _name(name) not in PROVIDED:
            pins[_name(name)] = f"{_name(name)}=={dist.version}"
    return sorted(pins.values())


def pip_command(target: Path, arch: str, wanted: list[str], pins: Path) -> list[str]:
    machine = ARCHITECTURES[arch]
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-compile",
        "--no-warn-conflicts",
        "--disable-pip-version-check",
        "--target",
        str(target),
        "--python-version",
        PYTHON_VERSION,
        "--implementation",
        "cp",
        "--only-binary=:all:",
        "--constraint",
        str(pins),
    ]
    for tag in MANYLINUX:
        command += ["--platform", f"{tag}_{machine}"]
    return command + wanted


def archive_name(arch: str) -> str:
    return f"deps-{arch}.tar.gz"


def build(out: Path, arch: str, root: Path | None = None) -> Path:
    """Write ``out/deps-<arch>.tar.gz`` (sorted members, fixed times: same packages, same
    bytes) and return its path."""
    if arch not in ARCHITECTURES:
        raise PackagingError(f"unknown architecture {arch!r} (known: {', '.join(ARCHITECTURES)})")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        target = Path(scratch) / "deps"
        pins = Path(scratch) / "constraints.txt"
        pins.write_text("\n".join(constraints()) + "\n")
        done = subprocess.run(
            pip_command(target, arch, requirements(root), pins),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise PackagingError(
                f"pip could not gather the packages for CPython {PYTHON_VERSION} on "
                f"{arch}:\n{done.stderr.strip()[-2000:]}"
            )
        archive = out / archive_name(arch)
        partial = archive.with_suffix(".part")
        _write_tar(target, partial)
        partial.replace(archive)
        (out / REQUIREMENTS).write_text("\n".join(installed(target)) + "\n")
    return archive


# The pinned list of what the archive holds: deploy/Dockerfile installs the same into an image.
REQUIREMENTS = "requirements-job.txt"


def installed(target: Path) -> list[str]:
    """``name==version`` of every distribution pip put in ``target``."""
    pins = []
    for info in sorted(target.glob("*.dist-info")):
        meta = (info / "METADATA").read_text(errors="replace")
        name = re.search(r"^Name: (.+)$", meta, re.M)
        version = re.search(r"^Version: (.+)$", meta, re.M)
        if name and version:
            pins.append(f"{name.group(1).strip()}=={version.group(1).strip()}")
    return pins


def _write_tar(folder: Path, archive: Path) -> None:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    with open(archive, "wb") as raw:
        # gzip's own header carries a time too: fixed at 0 by writing through GzipFile.
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as zipped:
            with tarfile.open(fileobj=zipped, mode="w") as tar:
                for path in files:
                    info = tarfile.TarInfo(path.relative_to(folder).as_posix())
                    data = path.read_bytes()
                    info.size, info.mtime = len(data), 0
                    info.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
                    tar.addfile(info, io.BytesIO(data))


def local_architecture() -> str:
    """This machine's architecture, in EMR's names (the rehearsal builds for it)."""
    import platform

    machine = platform.machine().lower()
    for arch, wheel_machine in ARCHITECTURES.items():
        if machine in (arch, wheel_machine):
            return arch
    raise PackagingError(f"no EMR architecture for this machine ({machine})")
