"""The jars the embedded default needs, and their installation into the venv's PySpark.

Decision: the jars are linked into ``pyspark/jars/`` of the virtualenv rather than passed with
``spark.jars``. Every Spark started from the venv then has them with no flag: ``spark-submit``,
dbt's session, the tests and a user's ``pyspark`` shell alike, and no path to a jar has to live in
``profiles.yml``. On EMR none of this is used: EMR bundles Iceberg.

The decoder (decision 0013) is the project's own Java source, ``java/``: compiled here with the
JDK's ``javac`` against PySpark's jars, cached under a hash of its sources and of PySpark's
version (``decoder_jar``), and linked like the others.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import importlib.util
import logging
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ingestion.config.errors import LakehouseError

log = logging.getLogger(__name__)

ICEBERG_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
SQLITE_JDBC_JAR = "/usr/share/java/sqlite-jdbc.jar"
DECODER_JAR = "dynamodb-lakehouse-decoder.jar"  # its name in pyspark/jars and beside the job
JAVA_SOURCE = Path(__file__).resolve().parents[2] / "java"


# S3A for reading s3:// outside EMR (EMR has EMRFS): not part of the default install. These two
# jars ship inside the PyPI source package of sagemaker-pyspark (deps/jars/, Apache-2.0); Maven
# Central is not reachable from where this project is built and tested.
AWS_SOURCE_PACKAGE = "sagemaker-pyspark==1.4.5"
AWS_JARS = ("hadoop-aws-3.3.1.jar", "aws-java-sdk-bundle-1.11.901.jar")


@dataclass(frozen=True)
class Jar:
    name: str
    source: Path
    hint: str


def _package_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def required_jars() -> list[Jar]:
    iceberg_pkg = _package_dir("snowpark_connect_deps_iceberg")
    iceberg = (iceberg_pkg or Path("<not installed>")) / "jars" / ICEBERG_JAR
    return [
        Jar(ICEBERG_JAR, iceberg, "pip install snowpark-connect-deps-iceberg==1.0.2"),
        Jar(
            "sqlite-jdbc.jar",
            Path(SQLITE_JDBC_JAR),
            "apt-get install libxerial-sqlite-jdbc-java libxerial-sqlite-jdbc-jni",
        ),
    ]


class JarsError(LakehouseError):
    """A jar Spark needs cannot be found or linked."""


def pyspark_jars_dir() -> Path:
    pyspark = _package_dir("pyspark")
    if pyspark is None:
        raise JarsError("pyspark is not installed: run `make setup`")
    return pyspark / "jars"


def missing_jars() -> list[str]:
    """Problems that stop Spark from using the embedded catalog, as fix-it messages."""
    target = pyspark_jars_dir()
    problems = []
    for jar in required_jars():
        if not (target / jar.name).exists():
            problems.append(f"{target / jar.name} is missing (run `make setup`; needs: {jar.hint})")
    decoder = decoder_problem()
    if decoder:
        problems.append(decoder)
    if not glob.glob("/usr/lib/*/jni/libsqlitejdbc.so"):
        problems.append(
            "SQLite JDBC native library missing: apt-get install libxerial-sqlite-jdbc-jni"
        )
    return problems


def _java_source(root: Path | None = None) -> Path:
    """The decoder's Java source: ``root``'s ``java/`` (the project being packaged) when it has
    one, else the checkout this package runs from."""
    if root is not None and (root / "java").is_dir():
        return root / "java"
    return JAVA_SOURCE


def _decoder_cached(source: Path) -> Path:
    """Where the decoder compiled from ``source`` is kept: named by a digest of its sources and
    of PySpark's version (what it is compiled against)."""
    sources = sorted(source.rglob("*.java"))
    if not sources:
        raise JarsError(
            f"the decoder's Java source is missing: no .java file under {source}. It ships with "
            "the project's source: run from a clone of the project (or set LAKEHOUSE_PROJECT_DIR "
            "to one)"
        )
    import pyspark

    digest = hashlib.sha256(pyspark.__version__.encode())
    for path in sources:
        digest.update(str(path.relative_to(source)).encode() + b"\0" + path.read_bytes())
    return decoder_cache_dir() / f"decoder-{digest.hexdigest()[:16]}.jar"


def decoder_cache_dir() -> Path:
    return Path(sys.prefix) / "share" / "dynamodb-lakehouse" / "decoder"


def decoder_jar(root: Path | None = None) -> Path:
    """The decoder's jar, compiled from ``java/`` (``root``'s, else this checkout's) with the
    JDK's ``javac`` against PySpark's jars, once per version of its sources and of PySpark
    (cached in the venv: ``share/dynamodb-lakehouse/decoder/``). The jar is a zip written with
    sorted entries and fixed times: the same classes, the same bytes."""
    source = _java_source(root)
    jar = _decoder_cached(source)
    if jar.is_file():
        return jar
    javac = shutil.which("javac")
    if not javac:
        raise JarsError(
            "javac is missing: the decoder is compiled from java/ "
            "(apt-get install openjdk-17-jdk-headless; `make setup` does)"
        )
    # PySpark's own jars, not an earlier decoder linked among them: a class the source no longer
    # has must fail to compile here, not at run time.
    classpath = [str(p) for p in sorted(pyspark_jars_dir().glob("*.jar")) if p.name != DECODER_JAR]
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=jar.parent) as scratch:
        classes = Path(scratch) / "classes"
        compiled = subprocess.run(
            [
                javac,
                "--release",
                "17",
                "-nowarn",
                "-encoding",
                "UTF-8",
                "-cp",
                ":".join(classpath),
                "-d",
                str(classes),
                *map(str, sorted(source.rglob("*.java"))),
            ],
            capture_output=True,
            text=True,
        )
        if compiled.returncode != 0:
            raise JarsError(f"javac failed on the decoder's source:\n{compiled.stderr[-3000:]}")
        partial = Path(scratch) / jar.name
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as bundle:
            for path in sorted(p for p in classes.rglob("*") if p.is_file()):
                info = zipfile.ZipInfo(path.relative_to(classes).as_posix(), (2020, 1, 1, 0, 0, 0))
                bundle.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)
        partial.replace(jar)  # one file system: whole or not at all
    log.info("jars: compiled the decoder into %s", jar)
    return jar


def decoder_problem() -> str | None:
    """Why PySpark's jars lack the decoder of this checkout's source, if they do: missing, or
    compiled from other sources (a pull changed ``java/`` since the last ``make setup``)."""
    link = pyspark_jars_dir() / DECODER_JAR
    if not link.exists():
        return f"{link} is missing (run `make setup`: it compiles java/)"
    if JAVA_SOURCE.is_dir() and link.resolve() != _decoder_cached(JAVA_SOURCE).resolve():
        return f"{link} was compiled from another version of java/ (run `make setup`)"
    return None


def _link(link: Path, source: Path) -> None:
    if link.is_symlink() or link.exists():
        if link.resolve() == source.resolve():
            return
        link.unlink()
    link.symlink_to(source)
    log.info("linked %s -> %s", link, source)


# Spark's configuration files that PySpark's own ``spark-submit`` reads (its ``conf`` folder,
# unless SPARK_CONF_DIR says otherwise): a plain ``spark-submit ingestion/main.py`` then starts
# with the driver memory and the quiet logging the CLI's own runs have.
CONF_FILES = ("spark-defaults.conf", "log4j2.properties")


def project_conf_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "conf"


def pyspark_conf_dir() -> Path:
    return pyspark_jars_dir().parent / "conf"


def install() -> None:
    conf = pyspark_conf_dir()
    conf.mkdir(exist_ok=True)
    for name in CONF_FILES:
        if (project_conf_dir() / name).is_file():
            _link(conf / name, project_conf_dir() / name)
    target = pyspark_jars_dir()
    for jar in required_jars():
        if not jar.source.is_file():
            raise SystemExit(f"jars: {jar.source} not found; install it with: {jar.hint}")
        _link(target / jar.name, jar.source)
    _link(target / DECODER_JAR, decoder_jar())
    names = [j.name for j in required_jars()] + [DECODER_JAR]
    print(f"jars: {', '.join(names)} ready in {target}")


def aws_jars_dir() -> Path:
    return Path(sys.prefix) / "share" / "dynamodb-lakehouse" / "aws-jars"


def install_aws() -> list[Path]:
    """The S3A jars, fetched once from their PyPI source package into the venv (not into
    PySpark's own jars: only a Spark started with ``LAKEHOUSE_EXTRA_JARS`` uses them)."""
    target = aws_jars_dir()
    wanted = [target / name for name in AWS_JARS]
    if all(path.is_file() for path in wanted):
        return wanted
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        log.info("jars: downloading %s (about 180 MB) for its S3A jars", AWS_SOURCE_PACKAGE)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--dest",
                scratch,
                AWS_SOURCE_PACKAGE,
            ],
            check=True,
        )
        archive = next(Path(scratch).glob("*.tar.gz"))
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                name = member.name.rsplit("/", 1)[-1]
                if name in AWS_JARS and "/deps/jars/" in member.name:
                    source = tar.extractfile(member)
                    assert source is not None
                    partial = target / (name + ".part")
                    partial.write_bytes(source.read())
                    partial.replace(target / name)
    missing = [str(p) for p in wanted if not p.is_file()]
    if missing:
        raise SystemExit(f"jars: {AWS_SOURCE_PACKAGE} did not hold {', '.join(missing)}")
    return wanted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ingestion.spark.jars")
    parser.add_argument("action", choices=["install", "check", "install-aws"])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.action == "install":
        try:
            install()
        except LakehouseError as exc:
            print(f"jars: {exc}", file=sys.stderr)
            return 1
        return 0
    if args.action == "install-aws":
        paths = install_aws()
        print("export LAKEHOUSE_EXTRA_JARS=" + ",".join(str(p) for p in paths))
        return 0
    problems = missing_jars()
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
