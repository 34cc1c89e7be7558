"""Stream change files -> staging -> dbt merge: ordering, duplicates, deletes, TTL, crashes, watch.

Real Spark, Iceberg and dbt. Change files are written by the Lambda module's writer
(ingestion.sources.change_file_writer) into a local folder; the expected final state is computed in
plain Python from the same files before they are ingested
(ingestion.samples.expected_state.expected_items).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
import readers
from items_back import final_items, strict_item, strict_items
from support import ROOT, final_ids

from ingestion.catalog import ledger
from ingestion.catalog import table as catalog_table
from ingestion.config import clock, settings
from ingestion.dynamodb import change_order
from ingestion.dynamodb.tables import get_table
from ingestion.maintenance import verify as verifying
from ingestion.merge import full_refresh, runner
from ingestion.samples import expected_state, sample_exports
from ingestion.samples import stream as sample_stream
from ingestion.sources import stream_files
from ingestion.sources.change_file_writer import write_batch
from ingestion.staging import exports, streams

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ITEMS, SEED = 40, 5


@pytest.fixture(scope="module")
def books_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("books-export")
    return sample_exports.write_samples(out, ITEMS, SEED, ["books"])["books"]


def write_stream(location: Path, batches: list[list[dict]]) -> list[str]:
    names = []
    for batch in batches:
        written, failed = write_batch(batch, str(location))
        assert failed is None
        names += [Path(w.uri).name for w in written]
    return names


def final_images(spark, table: str = "books") -> dict[str, dict]:
    """Id -> the item each row gives back, in the strict form (numbers by value)."""
    return {json.dumps([item["id"]]): strict_item(item) for item, _ in final_items(spark, table)}


def baseline(spark, books_export: Path) -> None:
    books = get_table("books")
    exports.ingest_export(spark, books, str(books_export))
    runner.run_merge(spark, [books], test=False)


def test_stream_changes_reach_the_final_table_in_sequence_order(
    spark, clean_lakehouse, books_export, tmp_path: Path
) -> None:
    """Duplicated records, two changes in one second (the later SequenceNumber is in the earlier
    file), updates, inserts, REMOVEs and TTL expiries: the final table is the expected state."""
    baseline(spark, books_export)
    location = tmp_path / "streams"
    names = write_stream(location, sample_stream.books_stream_records(ITEMS, SEED))
    expected = expected_state.expected_items([books_export, location / "books"], ["id"])

    result = streams.ingest_stream(spark, get_table("books"), str(location), settle_seconds=0)
    assert result.files == len(names) and result.cleaned == len(names) and result.pending == 0
    assert not list((location / "books").iterdir())  # staged, then deleted
    staged = spark.table("lake.staging.books").where(f"_batch_id = '{result.batch_id}'")
    operations = {r[0]: r[1] for r in staged.groupBy("_operation").count().collect()}
    assert operations.get("ttl_delete", 0) >= 1 and operations.get("delete", 0) >= 1
    assert staged.count() == result.changes
    # the re-delivered records collapsed: one row per (key, sequence number)
    assert staged.select("id", "_sequence").distinct().count() == result.changes
    entry = [e for e in ledger.entries(spark, "books") if e.batch_id == result.batch_id][0]
    assert entry.kind == ledger.STREAM and entry.file_names == set(names)

    counts, _ = runner.run_merge(spark, [get_table("books")])  # dbt test included
    assert final_images(spark) == strict_items(expected)
    same_second = [i for i in expected.values() if i["title"]["S"].startswith("Same Second")]
    assert [i["title"]["S"] for i in same_second] == ["Same Second, Later"]
    assert counts[0].deleted >= 2 and counts[0].inserted >= 1 and counts[0].updated >= 1

    again = streams.ingest_stream(spark, get_table("books"), str(location), settle_seconds=0)
    assert (again.files, again.changes, again.batch_id) == (0, 0, "")


@pytest.mark.parametrize(
    "one_task_bytes", [streams.ONE_TASK_BYTES, 0], ids=["one task", "every core"]
)
def test_redelivered_records_collapse_staged_by_one_task_or_by_every_core(
    spark, clean_lakehouse, books_export, tmp_path: Path, monkeypatch, one_task_bytes: int
) -> None:
    """A tick's few files are staged by one task (the dedupe needs no shuffle); a backlog over
    ``ONE_TASK_BYTES`` by every core: either way each re-delivered record is staged once."""
    monkeypatch.setattr(streams, "ONE_TASK_BYTES", one_task_bytes)
    exports.ingest_export(spark, get_table("books"), str(books_export))
    location = tmp_path / "streams"
    write_stream(location, sample_stream.books_stream_records(ITEMS, SEED))
    lines = sum(
        len(gzip.decompress(f.read_bytes()).splitlines()) for f in (location / "books").iterdir()
    )
    context, group = spark.sparkContext, f"stream-ingest-{one_task_bytes}"
    context.setJobGroup(group, "stream ingest")
    try:
        result = streams.ingest_stream(spark, get_table("books"), str(location), settle_seconds=0)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    tracker = context.statusTracker()
    jobs = [tracker.getJobInfo(job) for job in tracker.getJobIdsForGroup(group)]
    stages = sum(len(job.stageIds) for job in jobs if job is not None)
    assert stages == 1 if one_task_bytes else stages >= 2  # a shuffle only across cores
    staged = spark.table("lake.staging.books").where(f"_batch_id = '{result.batch_id}'")
    assert staged.count() == result.changes < lines  # the sample re-delivers some records
    assert (
        staged.select("id", "_version", "_sequence", "_operation").distinct().count()
        == result.changes
    )


def test_settle_time_and_max_files_leave_files_for_later(
    spark, clean_lakehouse, tmp_path: Path
) -> None:
    location = tmp_path / "streams"
    batches = [
        [
            sample_stream.stream_record(
                "books",
                "INSERT",
                {"id": {"S": f"s{i}"}},
                None,
                {"id": {"S": f"s{i}"}, "title": {"S": "t"}},
                1700000000 + i,
                500 + i,
            )
        ]
        for i in range(3)
    ]
    write_stream(location, batches)
    books = get_table("books")
    young = streams.ingest_stream(spark, books, str(location), settle_seconds=3600)
    assert (young.files, young.pending) == (0, 3)
    first = streams.ingest_stream(spark, books, str(location), settle_seconds=0, max_files=2)
    assert (first.files, first.changes, first.pending) == (2, 2, 1)
    second = streams.ingest_stream(spark, books, str(location), settle_seconds=0)
    assert (second.files, second.pending) == (1, 0)
    assert spark.table("lake.staging.books").count() == 3


def book_inserted(key: str, seq: int) -> dict:
    """A stream record inserting book ``key`` (the damaged-line tests' good change)."""
    image = {"id": {"S": key}, "title": {"S": key.upper()}}
    return sample_stream.stream_record(
        "books", "INSERT", {"id": {"S": key}}, None, image, 1700000000, seq
    )


def test_a_damaged_line_fails_the_staging_job_of_a_table_already_staged(
    spark, clean_lakehouse, tmp_path: Path
) -> None:
    """With the default --max-rejects 0 the staging job checks each line as it reads it (no
    count first): a damaged line among good ones, in a table with a commit already, fails the
    run before any commit, naming the file, line and reason; the files stay."""
    location = tmp_path / "streams"
    books = get_table("books")

    write_stream(location, [[book_inserted("a", 900)]])
    good = json.loads(gzip.decompress(next((location / "books").iterdir()).read_bytes()))
    assert streams.ingest_stream(spark, books, str(location), settle_seconds=0).changes == 1
    b = {"Keys": {"id": {"S": "b"}}, "NewImage": {"id": {"S": "b"}}, "SequenceNumber": "901"}
    lines = [
        json.dumps(good | b),
        json.dumps(good | {"Keys": {"id": {"N": "7"}}}),
        json.dumps(good),
    ]
    damaged = location / "books" / "20231114T221500Z-damaged.json.gz"
    damaged.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    with pytest.raises(
        stream_files.StreamError,
        match=r"1 damaged line\(s\), more than --max-rejects 0; the first: "
        r".*20231114T221500Z-damaged.json.gz line 2: Keys lacks 'id' of type S",
    ):
        streams.ingest_stream(spark, books, str(location), settle_seconds=0)
    assert damaged.exists()
    assert len(ledger.entries(spark, "books")) == 1
    assert [r["id"] for r in spark.table("lake.staging.books").select("id").collect()] == ["a"]
    # That check parses each line once: no reason pushed into the scan as a filter, where Spark
    # wrote the parse out again in each (three times the staging's own cost at 10,000 changes).
    checked = streams._checked(spark, books, [str(damaged)])
    plan = checked._jdf.queryExecution().executedPlan().toString()
    assert "DataFilters: []" in plan
    assert plan.count("from_json(StructField(eventName") == 1


def test_damaged_lines_fail_the_run_or_go_to_the_rejects_table(
    spark, clean_lakehouse, tmp_path: Path
) -> None:
    location = tmp_path / "streams"
    books = get_table("books")

    write_stream(location, [[book_inserted("g", 900)]])
    good = json.loads(gzip.decompress(next((location / "books").iterdir()).read_bytes()))
    lines = [
        json.dumps(
            book_inserted("a", 901)
            | good
            | {"SequenceNumber": "901", "Keys": {"id": {"S": "a"}}, "NewImage": {"id": {"S": "a"}}}
        ),
        "this is not json",
        json.dumps({k: v for k, v in good.items() if k != "Keys"}),
        json.dumps(good | {"Keys": {"id": {"N": "7"}}}),
        json.dumps(good | {"eventName": "UPSERT"}),
        json.dumps(
            good
            | {"SequenceNumber": "901", "Keys": {"id": {"S": "b"}}, "NewImage": {"id": {"S": "b"}}}
        ),
    ]
    damaged = location / "books" / "20231114T221400Z-damaged.json.gz"
    damaged.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))

    # Default --max-rejects 0: the run fails before any commit, naming file, line and reason.
    with pytest.raises(
        stream_files.StreamError,
        match=r"4 damaged line\(s\), more than --max-rejects 0; the first: "
        r".*20231114T221400Z-damaged.json.gz line 2: not a JSON object",
    ):
        streams.ingest_stream(spark, books, str(location), settle_seconds=0)
    assert damaged.exists() and len(list((location / "books").iterdir())) == 2
    assert ledger.entries(spark, "books") == []
    assert not spark.catalog.tableExists("lake.staging.books_rejects")

    # Within the limit: the good lines are staged, the damaged ones set aside with their reason.
    done = streams.ingest_stream(spark, books, str(location), settle_seconds=0, max_rejects=4)
    assert (done.files, done.changes, done.rejected) == (2, 3, 4)
    staged = sorted(r[0] for r in spark.table("lake.staging.books").select("id").collect())
    assert staged == ["a", "b", "g"]
    rejects = spark.table("lake.staging.books_rejects").orderBy("line").collect()
    assert [(Path(r["file"]).name, r["line"], r["reason"]) for r in rejects] == [
        (damaged.name, 2, "not a JSON object"),
        (damaged.name, 3, "no Keys"),
        (damaged.name, 4, "Keys lacks 'id' of type S"),
        (damaged.name, 5, "eventName is not INSERT, MODIFY or REMOVE"),
    ]
    assert rejects[0]["raw"] == "this is not json" and rejects[0]["batch_id"] == done.batch_id
    assert list((location / "books").iterdir()) == []
    # Recording the same rejects again (a run repeated after a crash) adds nothing.
    again = spark.table("lake.staging.books_rejects").select("file", "line", "reason", "raw")
    streams.record_rejects(spark, "books", again.localCheckpoint(), "repeat")
    assert spark.table("lake.staging.books_rejects").count() == 4


@pytest.mark.faults  # make test-faults
@pytest.mark.parametrize("fault", ["after-stream-commit", "during-stream-cleanup"])
def test_kill_between_commit_and_cleanup_then_run_again(
    spark, clean_lakehouse, books_export, tmp_path: Path, fault: str
) -> None:
    baseline(spark, books_export)
    location = tmp_path / "streams"
    names = write_stream(location, sample_stream.books_stream_records(ITEMS, SEED))
    expected = expected_state.expected_items([books_export, location / "books"], ["id"])
    command = [sys.executable, "-m", "ingestion.cli", "ingest", "--table", "books"]
    command += ["--stream", str(location), "--settle", "0"]
    env = {**os.environ, "LAKEHOUSE_FAULT": fault}
    killed = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert killed.returncode == -9, killed.stderr[-2000:]
    left = sorted(p.name for p in (location / "books").iterdir())
    assert len(left) == (len(names) if fault == "after-stream-commit" else len(names) - 1)
    spark.sql("refresh table lake.staging.books")
    rows = spark.table("lake.staging.books").count()

    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "0 change files staged" in again.stdout
    assert not list((location / "books").iterdir())  # deleted without being staged again
    spark.sql("refresh table lake.staging.books")
    assert spark.table("lake.staging.books").count() == rows
    runner.run_merge(spark, [get_table("books")])
    assert final_images(spark) == strict_items(expected)


def test_ttl_expiries_can_be_kept_flagged(
    spark, clean_lakehouse, books_export, tmp_path: Path, monkeypatch
) -> None:
    project = tmp_path / "project"
    for part in ("models", "macros", "tests/dbt"):
        if (ROOT / part).exists():
            shutil.copytree(ROOT / part, project / part)
    shutil.copy(ROOT / "profiles.yml", project / "profiles.yml")
    text = (ROOT / "dbt_project.yml").read_text()
    (project / "dbt_project.yml").write_text(
        text.replace(
            "      partition_key: id:S\n", "      partition_key: id:S\n      ttl_deletes: keep\n", 1
        )
    )
    monkeypatch.setenv("LAKEHOUSE_PROJECT_DIR", str(project))
    books = get_table("books")
    assert books.ttl_deletes == "keep"
    baseline(spark, books_export)
    location = tmp_path / "streams"
    write_stream(location, sample_stream.books_stream_records(ITEMS, SEED))
    expected = expected_state.expected_items(
        [books_export, location / "books"], ["id"], ttl_keep=True
    )
    deleted = expected_state.expected_items([books_export, location / "books"], ["id"])
    assert len(expected) > len(deleted)  # the sample has TTL expiries
    streams.ingest_stream(spark, books, str(location), settle_seconds=0)
    runner.run_merge(spark, [books])
    assert final_images(spark) == strict_items(expected)
    flagged = spark.table("lake.lakehouse.books").where("_operation = 'ttl_delete'").count()
    assert flagged == len(expected) - len(deleted)
    # A row kept for an expiry before an export's instant is no item of the table: DynamoDB's
    # export (the items left, expired ones gone) verifies equal to the table.
    now = clock.utc_now()
    truth = sample_exports.write_items_export(
        tmp_path / "truth", "books", list(deleted.values()), now
    )
    report = verifying.verify(spark, books, str(truth), record=False)
    assert report.equal and report.counts["equal"] == len(deleted), report.counts


@pytest.mark.faults  # make test-faults
def test_watch_survives_kill_9_and_readers_never_fail(
    spark, clean_lakehouse, books_export, lakehouse_home: Path, tmp_path: Path
) -> None:
    """watch is killed between its staging commit and its cleanup, then restarted; while it
    ingests, merges, compacts and deletes files, DuckDB (no Spark) and a Spark session read the
    final table in a loop: no read fails, and no change is lost or applied twice."""
    baseline(spark, books_export)
    location = tmp_path / "streams"
    batches = sample_stream.books_stream_records(ITEMS, SEED)
    write_stream(location, batches[:3])
    command = [sys.executable, "-m", "ingestion.cli", "watch", "--table", "books"]
    command += ["--stream", str(location), "--settle", "0", "--interval", "1"]
    env = {**os.environ, "LAKEHOUSE_FAULT": "after-stream-commit"}
    killed = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert killed.returncode == -9, killed.stdout[-2000:] + killed.stderr[-2000:]
    assert len(list((location / "books").iterdir())) > 0  # committed, not cleaned up

    log = tmp_path / "watch.log"
    with log.open("w") as out:
        watcher = subprocess.Popen(
            [*command, "--maintain-every", "2", "--test-every", "3"],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    failures: list[str] = []
    reads = {"duckdb": 0, "spark": 0}
    stop = threading.Event()

    def duckdb_loop() -> None:
        con = readers.connect()
        while not stop.is_set():
            try:
                rows = readers.read_rows(con, lakehouse_home, "books", "count(*), sum(length(id))")
                assert rows[0][0] > 0
                reads["duckdb"] += 1
            except Exception as exc:  # any failed read fails the test below
                failures.append(f"duckdb: {exc}")
            time.sleep(0.2)

    reader = threading.Thread(target=duckdb_loop, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 600
        for batch in batches[3:]:  # one batch per tick: several merges while the readers read
            ticks = log.read_text().count("tick ")
            write_stream(location, [batch])
            while log.read_text().count("tick ") == ticks and time.monotonic() < deadline:
                try:
                    spark.sql("refresh table lake.lakehouse.books")
                    assert spark.table("lake.lakehouse.books").count() > 0
                    reads["spark"] += 1
                except Exception as exc:
                    failures.append(f"spark: {exc}")
                time.sleep(0.5)
        while list((location / "books").iterdir()) and time.monotonic() < deadline:
            time.sleep(1)
        ticks_before = log.read_text().count("tick ")
        while log.read_text().count("tick ") < ticks_before + 2 and time.monotonic() < deadline:
            time.sleep(1)  # one more tick merges what the last one staged
    finally:
        stop.set()
        reader.join(timeout=30)
        watcher.send_signal(signal.SIGTERM)
        code = watcher.wait(timeout=300)
    output = log.read_text()
    assert code == 0, output[-3000:]
    assert "SIGTERM: stopping after this tick" in output and "stopped after" in output
    assert failures == [], failures[:5]
    assert reads["duckdb"] > 5 and reads["spark"] > 2, reads
    assert "data files" in output  # maintenance ran while the readers read
    print(f"reads without a failure: {reads}")
    print("\n".join(line for line in output.splitlines() if "tick" in line or "data files" in line))
    assert not list((location / "books").iterdir())

    # Expected: the full export, then every stream record (written before, computed from the
    # records themselves as the files are gone now).
    replay = tmp_path / "replay"
    write_stream(replay, batches)
    expected = expected_state.expected_items([books_export, replay / "books"], ["id"])
    assert final_images(spark) == strict_items(expected)
    # Every change file staged exactly once, across the kill and the restart (file names are
    # deterministic, so the replay has the same names).
    staged = [
        name
        for e in ledger.entries(spark, "books")
        if e.kind == ledger.STREAM
        for name in e.file_names
    ]
    assert sorted(staged) == sorted(p.name for p in (replay / "books").iterdir())
    duckdb_ids = {r[0] for r in readers.read_rows(readers.connect(), lakehouse_home, "books", "id")}
    assert duckdb_ids == {json.loads(k)[0]["S"] for k in expected}


def test_compaction_applies_deletes_and_readers_agree(
    spark, clean_lakehouse, books_export, lakehouse_home: Path, tmp_path: Path
) -> None:
    """Many small merges leave small data files and position-delete files; compaction (as
    `watch` runs it) leaves one data file, no delete file, and the same rows for DuckDB."""
    from ingestion.maintenance import compaction

    baseline(spark, books_export)
    books = get_table("books")
    batches = sample_stream.books_stream_records(ITEMS, SEED)
    replay = tmp_path / "replay"
    write_stream(replay, batches)
    expected = expected_state.expected_items([books_export, replay / "books"], ["id"])
    location = tmp_path / "streams"
    for batch in batches:  # one merge per Lambda batch
        write_stream(location, [batch])
        streams.ingest_stream(spark, books, str(location), settle_seconds=0)
        runner.run_merge(spark, [books], test=False)

    def files() -> dict[int, int]:
        spark.sql("refresh table lake.lakehouse.books")
        rows = spark.table("lake.lakehouse.books.files").groupBy("content").count().collect()
        return {r["content"]: r["count"] for r in rows}  # 0: data, 1: position deletes

    before = files()
    assert before.get(0, 0) >= 5 and before.get(1, 0) >= 5, before
    result = compaction.compact(spark, "books")
    after = files()
    assert after == {0: 1}, after
    assert result.data_files == (before[0], 1) and result.delete_files == (before[1], 0)
    assert final_images(spark) == strict_items(expected)
    duckdb_ids = sorted(
        r[0] for r in readers.read_rows(readers.connect(), lakehouse_home, "books", "id")
    )
    assert duckdb_ids == sorted(json.loads(k)[0]["S"] for k in expected)


def test_every_creation_time_form_the_writer_accepts_is_ingested_exactly(
    spark, clean_lakehouse, tmp_path: Path
) -> None:
    """A float ApproximateCreationDateTime (1767225600.0, which Spark renders as 1.7672256E9)
    accepted by the writer and rejected by the ingest would stall the stream: the writer
    normalises every form and the ingest reads any JSON number exactly."""
    books = get_table("books")
    location = tmp_path / "streams"
    forms: dict[str, tuple[int | float, str | None]] = {
        "integer": (1767225600, None),
        "float": (1767225601.0, None),
        "fraction": (1767225602.25, None),
        "millis": (1767225603123, "MILLISECOND"),
        "micros": (1767225604123456, "MICROSECOND"),
    }
    records = []
    for sequence, (key, (created, precision)) in enumerate(forms.items(), 1):
        record = sample_stream.stream_record(
            "books", "INSERT", {"id": {"S": key}}, None, {"id": {"S": key}}, created, sequence
        )
        if precision:
            record["dynamodb"]["ApproximateCreationDateTimePrecision"] = precision
        records.append(record)
    write_stream(location, [records])
    # And a line an older writer left: the float as it was, which Spark reads as 1.7672256E9.
    legacy = {
        "Keys": {"id": {"S": "legacy"}},
        "NewImage": {"id": {"S": "legacy"}},
        "SequenceNumber": "9",
        "ApproximateCreationDateTime": 1767225600.0,
        "eventName": "INSERT",
        "eventID": "9",
    }
    (location / "books" / "20260101T000000Z-legacy.json.gz").write_bytes(
        gzip.compress((json.dumps(legacy) + "\n").encode())
    )
    result = streams.ingest_stream(spark, books, str(location), settle_seconds=0)
    assert (result.changes, result.rejected) == (len(forms) + 1, 0)
    versions = {
        r["id"]: r["_version"]
        for r in spark.table("lake.staging.books")
        .where(f"_batch_id = '{result.batch_id}'")
        .collect()
    }
    assert versions == {
        "integer": 1767225600_999999,
        "float": 1767225601_999999,
        "fraction": 1767225602_250999,
        "millis": 1767225603_123999,
        "micros": 1767225604_123999,
        "legacy": 1767225600_999999,
    }
    # The expected state (plain Python, samples.expected_state) uses the same rule as the ingest.
    normalised = {
        "integer": 1767225600,
        "float": 1767225601,
        "fraction": "1767225602.25",
        "millis": "1767225603.123",
        "micros": "1767225604.123456",
    }
    assert {k: change_order.stream_version(v) for k, v in normalised.items()} == {
        k: versions[k] for k in normalised
    }


def test_watch_merges_a_batch_staged_but_never_merged_without_new_files(
    spark, clean_lakehouse, books_export, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A watch killed after its staging commit (or a tick whose merge failed) left a batch the
    merge log lacks; the next watch saw no new files and never merged it, on a quiet table
    maybe never, while status showed the batch like any other."""
    from ingestion.catalog import merge_log
    from ingestion.cli import main
    from ingestion.jobs.watch import WatchOptions, watch

    baseline(spark, books_export)
    books = get_table("books")
    location = tmp_path / "streams"
    image = {"id": {"S": "late"}, "title": {"S": "staged, never merged"}}
    write_stream(
        location,
        [
            [
                sample_stream.stream_record(
                    "books", "INSERT", {"id": {"S": "late"}}, None, image, 1769000000, 900
                )
            ]
        ],
    )
    staged = streams.ingest_stream(spark, books, str(location), settle_seconds=0)
    assert staged.files == 1 and merge_log.new_batches(spark, "books") == [staged.batch_id]
    capsys.readouterr()
    assert main(["status", "--table", "books"]) == 0
    assert _merged_column(capsys.readouterr().out) == {"FULL": "yes", "STREAM": "no"}

    options = WatchOptions(
        stream=str(location), interval=0, ticks=1, settle=0, test_every=1, maintain_every=0
    )
    lines: list[str] = []
    # run_results.json only: the watch's warm-up (`dbt parse`, once a process) writes the manifest.
    artifacts = [settings.project_dir() / "target" / "run_results.json"]

    def written() -> list[int | None]:
        return [f.stat().st_mtime_ns if f.exists() else None for f in artifacts]

    before = written()
    ticks = watch(spark, [books], options, report=lines.append)
    assert len(ticks) == 1, lines
    only = ticks[0]
    assert (only.files, only.inserted) == (0, 1)  # no new file, and the batch merged
    assert "late" in final_ids(spark)
    assert merge_log.new_batches(spark, "books") == []
    assert main(["status", "--table", "books"]) == 0
    assert _merged_column(capsys.readouterr().out) == {"FULL": "yes", "STREAM": "yes"}
    # A tick's dbt run and test write no artifacts (dbt_process.dbt_invoke): a merge does.
    assert written() == before
    runner.run_merge(spark, [books], test=False, full_refresh=True)
    assert all(now is not None and now != then for now, then in zip(written(), before, strict=True))

    # The whole-table check (WatchOptions.check_every, a day by default): a tick's tests see
    # only the rows its merges wrote, so a row deleted by hand, of a key no batch touched, is
    # found by it alone. Reported on the tick's line; the watch goes on, and checks again.
    damaged = sorted(set(final_ids(spark)) - {"late"})[0]
    spark.sql(f"delete from lake.lakehouse.books where id = '{damaged}'")
    ticks = watch(spark, [books], options, report=lines.append)  # not due in this watch's day
    assert ticks[0].maintain_error is None and ticks[0].error is None
    due = dataclasses.replace(options, ticks=2, check_every=timedelta(0))
    ticks = watch(spark, [books], due, report=lines.append)
    assert all((t.maintain_error or "").startswith("whole-table check: `dbt test") for t in ticks)
    assert "dynamodb_final_table_books_books" in capsys.readouterr().out
    assert "maintenance FAILED: whole-table check" in ticks[1].line() and ticks[1].error is None


def _merged_column(status: str) -> dict[str, str]:
    """kind -> the ledger table's "merged" cell, from `status` output."""
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in status.splitlines()]
    return {row[1]: row[-1] for row in cells if len(row) == 6 and row[1] in ("FULL", "STREAM")}


def test_a_late_change_older_than_the_newest_full_export_never_resurrects_an_item(
    spark, clean_lakehouse, tmp_path: Path
) -> None:
    """F0 holds a and b, F1 (an hour later) only a: b is gone. A stream file arriving late with
    `MODIFY b` from between the two must not insert b again in the incremental merge (the full
    build would not), nor fail `dbt test` after the batch was recorded as merged."""

    from ingestion.samples.items import BASE_TIME

    books = get_table("books")

    def item(key: str, title: str) -> dict:
        return {"id": {"S": key}, "title": {"S": title}}

    f0 = sample_exports.write_items_export(
        tmp_path / "f0", "books", [item("a", "A"), item("b", "B")], moment=BASE_TIME
    )
    f1 = sample_exports.write_items_export(
        tmp_path / "f1", "books", [item("a", "A")], moment=BASE_TIME + timedelta(hours=1), seed=1
    )
    for export in (f0, f1):
        exports.ingest_export(spark, books, str(export))
    runner.run_merge(spark, [books])
    assert set(final_ids(spark)) == {"a"}

    late = int((BASE_TIME + timedelta(minutes=30)).timestamp())
    location = tmp_path / "streams"
    write_stream(
        location,
        [
            [
                sample_stream.stream_record(
                    "books",
                    "MODIFY",
                    {"id": {"S": "b"}},
                    item("b", "B"),
                    item("b", "B, late"),
                    late,
                    7,
                )
            ]
        ],
    )
    streams.ingest_stream(spark, books, str(location), settle_seconds=0)
    runner.run_merge(spark, [books])  # dbt test included: passes
    assert set(final_ids(spark)) == {"a"}
    # and the same as a full build of the same change log
    runner.run_merge(spark, [books], full_refresh=True)
    assert set(final_ids(spark)) == {"a"}


def test_a_failed_data_test_leaves_the_batch_unmerged_and_blocks_the_next_merge(
    spark, clean_lakehouse, books_export, tmp_path: Path
) -> None:
    from ingestion.catalog import merge_log
    from ingestion.merge.runner import DbtError

    baseline(spark, books_export)
    books = get_table("books")
    # A row the change log does not explain, of the key the next batch changes (the merge's
    # tests look at the keys its batches touch): the tests fail on it.
    key = spark.sql("select min(id) from lake.lakehouse.books").first()[0]
    spark.sql(
        f"insert into lake.lakehouse.books select * from lake.lakehouse.books where id = '{key}'"
    )
    location = tmp_path / "streams"
    image = {"id": {"S": key}, "title": {"S": "t"}}
    write_stream(
        location,
        [
            [
                sample_stream.stream_record(
                    "books", "MODIFY", {"id": {"S": key}}, image, image, 1769000000, 11
                )
            ]
        ],
    )
    staged = streams.ingest_stream(spark, books, str(location), settle_seconds=0)
    persisted = set(spark.sparkContext._jsc.getPersistentRDDs().keys())  # earlier tests'
    for _ in range(2):  # the next merge is blocked the same way, with the same message
        with pytest.raises(DbtError, match="not recorded as merged: the next merge applies") as no:
            runner.run_merge(spark, [books])
        assert "books: keys more than once 1" in str(no.value)  # what failed, named
        assert merge_log.new_batches(spark, "books") == [staged.batch_id]
        # and leaves nothing cached (the touched keys, where the counts read them)
        assert set(spark.sparkContext._jsc.getPersistentRDDs().keys()) <= persisted
    spark.sql(
        "delete from lake.lakehouse.books where id in "
        "(select id from lake.lakehouse.books group by id having count(*) > 1)"
    )
    runner.run_merge(spark, [books], full_refresh=True)
    assert merge_log.new_batches(spark, "books") == []
    assert spark.sql(f"select title from lake.lakehouse.books where id = '{key}'").collect() == [
        ("t",)
    ]


def test_drift_in_the_stream_is_adopted_without_a_manual_step(
    spark, clean_lakehouse, books_export, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A value that did not fit its column (`pages` bigint meets 3.25) stayed null in the final
    table until someone ran `rebuild`: a wrong answer in Athena with no end date. With the
    table's `adopt_drift` (default on) the same run widens the column from the staged images and
    the next merge rebuilds the final table: the value reads back exactly."""
    from decimal import Decimal

    from ingestion.cli import main
    from ingestion.maintenance import adopt
    from ingestion.staging import drift

    baseline(spark, books_export)
    books = get_table("books")
    image = {"id": {"S": "drift"}, "title": {"S": "t"}, "pages": {"N": "3.25"}}
    location = tmp_path / "streams"
    write_stream(
        location,
        [
            [
                sample_stream.stream_record(
                    "books", "INSERT", {"id": {"S": "drift"}}, None, image, 1769000000, 21
                )
            ]
        ],
    )
    # The off setting keeps the value null (listed in _drift) and changes nothing.
    assert (
        adopt.adopt_drift(
            spark,
            books.model_copy(update={"adopt_drift": False}),
            [drift.Drift("pages", "s", 1, "")],
        )
        == []
    )
    capsys.readouterr()
    assert main(["ingest", "--table", "books", "--stream", str(location), "--settle", "0"]) == 0
    out = capsys.readouterr().out
    assert "drift adopted (pages)" in out and "pages: bigint -> decimal(38,2)" in out
    assert main(["merge", "--table", "books"]) == 0
    spark.sql("refresh table lake.lakehouse.books")
    row = spark.table("lake.lakehouse.books").where("id = 'drift'").first()
    assert row["pages"] == Decimal("3.25") and row["_drift"] is None
    assert drift.drift_report(spark, "books") == []
    assert main(["merge", "--table", "books"]) == 0  # and the next merge is incremental again
    assert not full_refresh.needs_full_refresh(catalog_table.load([books], spark)[0])
