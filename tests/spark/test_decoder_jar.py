"""The decoder's jar (decision 0013): compiled from the project's Java source with javac, the
same bytes from the same source, a compile error or a missing source told in one line, and a jar
older than the source found by the checks `doctor` and `make setup` run. No Spark: javac only."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ingestion.spark import jars


@pytest.fixture
def source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the project's java/ and a cache of its own (the venv's stays untouched)."""
    root = tmp_path / "project"
    shutil.copytree(jars.JAVA_SOURCE, root / "java")
    monkeypatch.setattr(jars, "decoder_cache_dir", lambda: tmp_path / "cache")
    return root


def test_the_same_source_gives_the_same_jar_and_a_changed_one_another(source: Path) -> None:
    first = jars.decoder_jar(source)
    assert first.parent == source.parent / "cache" and first.stat().st_size > 1000
    built = first.read_bytes()
    first.unlink()
    assert jars.decoder_jar(source) == first and first.read_bytes() == built  # reproducible
    with __import__("zipfile").ZipFile(first) as jar:
        assert "dynamodb_lakehouse/decode/ItemDecoder.class" in jar.namelist()
    decode = source / "java" / "dynamodb_lakehouse" / "decode" / "Decode.java"
    decode.write_text(decode.read_text() + "\n// a change\n")
    assert jars.decoder_jar(source) != first  # another source, another jar


def test_a_compile_error_and_a_missing_source_say_what_to_do(
    source: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = source / "java" / "dynamodb_lakehouse" / "decode" / "Value.java"
    broken.write_text(
        broken.read_text().replace("static int descriptor(", "static int descriptor((")
    )
    with pytest.raises(
        jars.JarsError, match=r"javac failed on the decoder's source:\n.*Value.java"
    ):
        jars.decoder_jar(source)
    monkeypatch.setattr(jars, "JAVA_SOURCE", source / "java")
    assert jars.main(["install"]) == 1  # one line, no traceback (`make setup` prints it)
    assert capsys.readouterr().err.startswith("jars: javac failed on the decoder's source")
    empty = source.parent / "empty"
    (empty / "java").mkdir(parents=True)
    monkeypatch.setattr(jars, "JAVA_SOURCE", empty / "java")
    with pytest.raises(jars.JarsError, match="no .java file under .*: run from a clone"):
        jars.decoder_jar()


def test_a_jar_older_than_the_source_is_found(
    source: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    compiled = jars.decoder_jar(source)  # against PySpark's own jars
    pyspark_jars = tmp_path / "pyspark-jars"
    pyspark_jars.mkdir()
    monkeypatch.setattr(jars, "pyspark_jars_dir", lambda: pyspark_jars)
    monkeypatch.setattr(jars, "JAVA_SOURCE", source / "java")
    assert "is missing (run `make setup`" in str(jars.decoder_problem())
    (pyspark_jars / jars.DECODER_JAR).symlink_to(compiled)
    assert jars.decoder_problem() is None
    decode = source / "java" / "dynamodb_lakehouse" / "decode" / "Decode.java"
    decode.write_text(decode.read_text() + "\n// pulled since\n")
    assert "compiled from another version of java/ (run `make setup`)" in str(
        jars.decoder_problem()
    )
