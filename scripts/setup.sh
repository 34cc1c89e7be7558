#!/usr/bin/env bash
# Installs everything the project needs on a fresh machine, and nothing twice:
#   - Debian packages: a Java 17 runtime (only when `java` is missing) and the SQLite JDBC driver
#     (Iceberg's JDBC catalog on a SQLite file is the embedded default's catalog);
#   - the virtualenv .venv with the pinned Python packages (re-installed when pyproject.toml changes);
#   - the jars Spark needs, linked from the PyPI / Debian packages into the venv's PySpark.
# Idempotent: a second run checks and returns in about a second.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3

apt_updated=0
apt_install() {
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "setup: need root (or sudo) to apt-get install $*" >&2; exit 1; }
    sudo="sudo"
  fi
  if [ "$apt_updated" = 0 ]; then
    echo "setup: apt-get update"
    $sudo apt-get update -qq
    apt_updated=1
  fi
  echo "setup: apt-get install $*"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

missing=()
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
# javac: staging's decoder is compiled from java/ (decision 0013), and the EMR rehearsal
# (tests/aws) compiles its stand-in for the Glue catalog.
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
[ -f /usr/share/java/sqlite-jdbc.jar ] || missing+=(libxerial-sqlite-jdbc-java)
ls /usr/lib/*/jni/libsqlitejdbc.so >/dev/null 2>&1 || missing+=(libxerial-sqlite-jdbc-jni)
if [ ${#missing[@]} -gt 0 ]; then
  apt_install "${missing[@]}"
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
fi

stamp="$VENV/.installed"
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing Python packages into $VENV (first run: about a minute)"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e '.[dev,light]'
  echo "$want" > "$stamp"
fi

"$VENV/bin/python" -m ingestion.spark.jars install
