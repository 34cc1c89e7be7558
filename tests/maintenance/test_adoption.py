"""Drift adoption through the CLI, as a user meets it: a table ``t`` (``id:S``), a full export,
then stream changes. Types live with the staging table; a declared type is never changed; drift
that cannot be adopted is never merged as NULL; the counts of a drift-triggered refresh are the
rows that changed; a rebuild finds the commits it overwrote by lineage, not by clocks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ingestion.catalog import merge_log, table_metadata, table_types
from ingestion.catalog import table as catalog_table
from ingestion.cli import main
from ingestion.dynamodb.tables import get_table
from ingestion.maintenance import rebuild
from ingestion.merge import dbt_process, runner
from ingestion.project import onboarding
from ingestion.samples import sample_exports
from ingestion.samples import stream as sample_stream
from ingestion.samples.items import BASE_TIME
from ingestion.schema import schema_file
from ingestion.sources.change_file_writer import write_batch
from ingestion.staging import streams

pytestmark = [pytest.mark.slow, pytest.mark.integration]

LATER = int(BASE_TIME.timestamp()) + 3600


def n(value: str) -> dict[str, str]:
    return {"N": value}


def s(value: str) -> dict[str, str]:
    return {"S": value}


def modify(old: dict[str, Any], new: dict[str, Any], sequence: int) -> dict[str, Any]:
    return sample_stream.stream_record(
        "t", "MODIFY", {"id": new["id"]}, old, new, LATER + sequence, sequence
    )


def final(spark) -> dict[str, dict[str, Any]]:
    spark.sql("refresh table lake.lakehouse.t")
    return {r["id"]: r.asDict(recursive=True) for r in spark.table("lake.lakehouse.t").collect()}


def column_types(spark, table: str) -> dict[str, str]:
    spark.sql(f"refresh table {table}")
    return {f.name: f.dataType.simpleString() for f in spark.table(table).schema.fields}


@pytest.fixture
def table_t(spark, clean_lakehouse, project_copy: Path, tmp_path: Path):
    """Table ``t`` added to a copy of the project; returns a function that writes stream changes
    and runs ``sync --stream`` over them (its exit status)."""
    onboarding.add_table("t", "id:S", None)
    location = tmp_path / "streams"

    def sync_stream(*records: dict[str, Any]) -> int:
        if records:
            assert write_batch(list(records), str(location))[1] is None
        return main(["sync", "--table", "t", "--stream", str(location), "--settle", "0"])

    yield sync_stream
    schema_file.schema_path("t").unlink(missing_ok=True)
    for name in ("lake.staging.t", "lake.lakehouse.t"):
        spark.sql(f"drop table if exists {name}")


def test_a_declared_type_is_kept_when_drift_is_adopted(
    spark, table_t, tmp_path: Path, capsys
) -> None:
    declared = {"attributes": {"attrs": {"column": "attrs", "type": "string"}}}
    path = schema_file.schema_path("t")
    path.write_text(json.dumps(declared))
    a = {"id": s("a"), "qty": n("1"), "attrs": {"M": {"u1": n("1")}}}
    b = {"id": s("b"), "qty": n("2"), "attrs": {"M": {"u2": n("2")}}}
    full = sample_exports.write_items_export(tmp_path / "full", "t", [a, b])
    assert main(["sync", "--table", "t", str(full)]) == 0
    assert column_types(spark, "lake.staging.t")["qty"] == "bigint"

    assert table_t(modify(a, {**a, "qty": n("1.5")}, 1)) == 0
    assert column_types(spark, "lake.staging.t")["qty"] == "decimal(38,1)"
    assert column_types(spark, "lake.staging.t")["attrs"] == "string"  # declared: kept
    assert column_types(spark, "lake.lakehouse.t")["attrs"] == "string"
    rows = final(spark)
    assert str(rows["a"]["qty"]) == "1.5" and json.loads(rows["a"]["attrs"]) == {"u1": 1}
    assert json.loads(path.read_text()) == declared  # the person's file is never rewritten
    stored = table_types.stored_schema(spark, get_table("t"))
    assert stored is not None and stored.get("qty").type.sql() == "decimal(38,1)"
    assert stored.get("attrs").type.sql() == "string"
    capsys.readouterr()
    assert main(["schema", "--table", "t"]) == 0  # the types as the jobs read them
    shown = capsys.readouterr()
    assert "kept with lake.staging.t" in shown.err
    attributes = json.loads(shown.out)["attributes"]
    assert attributes["qty"]["type"] == "decimal(38,1)" and "dynamodb_types" in attributes["qty"]
    assert attributes["attrs"]["type"] == "string"
    assert "dynamodb_types" not in attributes["attrs"]  # declared, not detected

    # A new dictionary key is no drift for a declared string: no rewrite, no full refresh.
    snapshots = spark.table("lake.staging.t.snapshots").count()
    assert table_t(modify(b, {**b, "attrs": {"M": {"u2": n("2"), "u9": n("9")}}}, 2)) == 0
    assert spark.table("lake.staging.t.snapshots").count() == snapshots + 1  # one append only
    assert json.loads(final(spark)["b"]["attrs"]) == {"u2": 2, "u9": 9}


def test_a_type_declared_inside_a_detected_map_is_kept_and_reported_not_adopted(
    spark, table_t, tmp_path: Path, capsys
) -> None:
    """`details` is detected, its field `c` declared bigint. `schema` prints the nested detected
    field with its `dynamodb_types` (finding 5: it printed none, which declares it). A value of
    `c` that does not fit was "adopted" on every batch: a staging rebuild that changed no type
    (finding 6); it is reported as not fitting the declared type, and nothing is rebuilt."""
    details = {
        "column": "details",
        "type": "struct",
        "dynamodb_types": {"M": 1},
        "fields": {"c": {"column": "c", "type": "bigint"}},
    }
    path = schema_file.schema_path("t")
    path.write_text(json.dumps({"attributes": {"details": details}}))
    a = {"id": s("a"), "qty": n("1"), "details": {"M": {"c": n("1"), "d": s("x")}}}
    full = sample_exports.write_items_export(tmp_path / "full", "t", [a])
    assert main(["sync", "--table", "t", str(full)]) == 0
    capsys.readouterr()
    assert main(["schema", "--table", "t"]) == 0
    fields = json.loads(capsys.readouterr().out)["attributes"]["details"]["fields"]
    assert fields["d"]["dynamodb_types"] == {"S": 1}  # detected: marked
    assert "dynamodb_types" not in fields["c"] and fields["c"]["type"] == "bigint"  # declared

    snapshots = spark.table("lake.staging.t.snapshots").count()
    assert table_t(modify(a, {**a, "details": {"M": {"c": n("1.5"), "d": s("x")}}}, 1)) == 0
    out = capsys.readouterr().out
    assert "1 value(s) of 'details' do not fit a type declared inside it" in out
    assert "drift adopted" not in out
    assert spark.table("lake.staging.t.snapshots").count() == snapshots + 1  # the append only
    assert column_types(spark, "lake.staging.t")["details"] == "struct<c:bigint,d:string>"
    assert final(spark)["a"]["details"] is None  # null in its column, whole in _rest
    # A plain `dbt run` of the whole change log lets that drift through too: kept null by design.
    dbt_process.dbt_invoke(["run", "--select", "t", "--full-refresh"])
    assert final(spark)["a"]["details"] is None

    # With a detected attribute's misfit in the same batch: that one is adopted (and named),
    # the nested declaration's misfit is reported, never called adopted.
    both = {**a, "qty": n("2.5"), "details": {"M": {"c": n("2.5"), "d": s("x")}}}
    assert table_t(modify(a, both, 2)) == 0
    out = capsys.readouterr().out
    assert "1 value(s) of 'details' do not fit a type declared inside it" in out
    assert (
        "drift adopted (qty): staging rebuilt from the images (qty: bigint -> decimal(38,1))" in out
    )
    assert column_types(spark, "lake.staging.t")["details"] == "struct<c:bigint,d:string>"


def test_drift_that_cannot_be_adopted_is_never_merged_as_null(
    spark, table_t, tmp_path: Path, capsys
) -> None:
    a = {"id": s("a"), "info": {"M": {"color": s("red")}}}
    full = sample_exports.write_items_export(tmp_path / "full", "t", [a])
    assert main(["sync", "--table", "t", str(full)]) == 0
    changed = {"id": s("a"), "info": {"M": {"color": s("red"), "Size": n("1"), "size": n("2")}}}
    capsys.readouterr()

    assert table_t(modify(a, changed, 1)) == 2
    message = capsys.readouterr().err
    assert "'Size' and 'size' both map to column 'size'" in message
    assert '"info": {"type": "string"}' in message and "schemas/t.json" in message
    assert final(spark)["a"]["info"] == {"color": "red"}  # not merged: no NULL written
    assert merge_log.new_batches(spark, "t")  # the batch waits

    # A plain `dbt run` meets the same batch: refused in one line naming it, nothing written.
    with pytest.raises(dbt_process.DbtError):
        dbt_process.dbt_invoke(["run", "--select", "t"])
    shown = "".join(capsys.readouterr())
    assert (
        "holds values that do not fit their columns (info) and that drift is not adopted yet: "
        "nothing was merged" in shown
    )
    assert "ddb-lakehouse merge --table t" in shown
    assert "Job aborted" not in shown and "\tat " not in shown  # dbt's line, not a Spark stack
    assert final(spark)["a"]["info"] == {"color": "red"}
    # ... and `dbt test` fails: the final table lacks the batch's changes.
    with pytest.raises(dbt_process.DbtError):
        dbt_process.dbt_invoke(["test", "--select", "t"])
    assert "dynamodb_final_table_t_t" in "".join(capsys.readouterr())

    assert table_t() == 2  # every run says it again, and merges nothing
    assert "'Size' and 'size' both map to column 'size'" in capsys.readouterr().err
    assert final(spark)["a"]["info"] == {"color": "red"}

    fix = {"attributes": {"info": {"type": "string"}}}
    schema_file.schema_path("t").write_text(json.dumps(fix))
    assert table_t() == 0  # the same command, after the fix
    info = json.loads(final(spark)["a"]["info"])
    assert info == {"color": "red", "Size": 1, "size": 2}
    assert merge_log.new_batches(spark, "t") == []


def test_counts_after_a_drift_triggered_refresh_are_the_rows_that_changed(
    spark, table_t, tmp_path: Path, capsys
) -> None:
    a = {"id": s("a"), "qty": n("1")}
    b = {"id": s("b"), "qty": n("2")}
    full = sample_exports.write_items_export(tmp_path / "full", "t", [a, b])
    assert main(["sync", "--table", "t", str(full)]) == 0
    capsys.readouterr()
    assert table_t(modify(a, {**a, "qty": n("1.5")}, 1)) == 0
    out = capsys.readouterr().out
    assert "drift adopted" in out
    assert merge_row(out, "lakehouse.t") == ["lakehouse.t", "2", "0", "1", "0"], out
    assert str(final(spark)["a"]["qty"]) == "1.5"


def merge_row(out: str, table: str) -> list[str]:
    """The merge summary's row of ``table``: its cells."""
    for text in out.splitlines():
        cells = [c for c in text.replace("|", " ").split() if c]
        if cells and cells[0] == table:
            return cells
    raise AssertionError(f"no row for {table} in:\n{out}")


def test_lost_commits_are_found_by_lineage_not_by_commit_time() -> None:
    """Snapshots whose commit times are out of order (other machines' clocks): 2 was read, 3 and
    4 descend from it on the old branch, 5 is the replace, 6 an append after it."""
    Commit = rebuild.Commit
    source = {"dynamodb-lakehouse.source": "x"}
    commits = [
        Commit(1, None, source),
        Commit(2, 1, source),
        Commit(4, 3, {**source, "dynamodb-lakehouse.batch-id": "late"}),  # listed first
        Commit(3, 2, {**source, "dynamodb-lakehouse.batch-id": "early"}),
        Commit(5, None, {"dynamodb-lakehouse.ledger": "[]"}),
        Commit(6, 5, source),
    ]
    lost = rebuild.lost_commits(commits, read_id=2, head_id=6)
    assert [c.snapshot_id for c in lost] == [3, 4]  # oldest first, by lineage
    assert rebuild.lost_commits(commits, read_id=4, head_id=6) == []


def test_a_merge_between_the_replace_and_the_restage_still_merges_the_batch(
    spark, table_t, tmp_path: Path
) -> None:
    """Another process stages a batch while a rebuild runs, and a watch merges between the
    rebuild's replace and its restage: the merge log recorded the batch while its rows were
    missing; the restage takes it out again, so the next merge applies it."""
    a = {"id": s("a"), "qty": n("1")}
    full = sample_exports.write_items_export(tmp_path / "full", "t", [a])
    assert main(["sync", "--table", "t", str(full)]) == 0
    t = get_table("t")
    location = tmp_path / "streams"
    racing = {"id": s("race"), "qty": n("7")}
    record = sample_stream.stream_record("t", "INSERT", {"id": s("race")}, None, racing, LATER, 1)
    assert write_batch([record], str(location))[1] is None

    def other_writer() -> None:
        streams.ingest_stream(spark, t, str(location), settle_seconds=0)

    def watch_merge() -> None:
        runner.run_merge(spark, [t], test=False)

    rebuilt = rebuild.rebuild_staging(
        spark, t, before_commit=other_writer, after_commit=watch_merge
    )
    assert len(rebuilt.restaged) == 1
    assert "race" not in final(spark)  # the watch merged nothing of it: its rows were missing
    runner.run_merge(spark, [t])
    assert final(spark)["race"]["qty"] == 7


def test_a_rebuild_stopped_before_its_restage_is_completed_by_the_next_merge(
    spark, table_t, tmp_path: Path
) -> None:
    """Killed between its replace and its restage, a rebuild left another process's batch out of
    staging (its change files already deleted): the next merge finds it by lineage from the
    snapshot the rebuild read (kept in the replace's summary), stages it again and merges it."""
    a = {"id": s("a"), "qty": n("1")}
    full = sample_exports.write_items_export(tmp_path / "full", "t", [a])
    assert main(["sync", "--table", "t", str(full)]) == 0
    t = get_table("t")
    location = tmp_path / "streams"
    racing = {"id": s("race"), "qty": n("7")}
    record = sample_stream.stream_record("t", "INSERT", {"id": s("race")}, None, racing, LATER, 1)
    assert write_batch([record], str(location))[1] is None

    class Killed(Exception):
        pass

    def killed() -> None:
        raise Killed

    def other_writer() -> None:
        streams.ingest_stream(spark, t, str(location), settle_seconds=0)

    with pytest.raises(Killed):
        rebuild.rebuild_staging(spark, t, before_commit=other_writer, after_commit=killed)
    spark.sql("refresh table lake.staging.t")
    assert spark.table("lake.staging.t").where("id = 'race'").isEmpty()  # overwritten
    assert main(["merge", "--table", "t"]) == 0
    assert final(spark)["race"]["qty"] == 7
    assert main(["merge", "--table", "t"]) == 0  # and once only
    spark.sql("refresh table lake.staging.t")
    assert spark.table("lake.staging.t").where("id = 'race'").count() == 1


def test_a_writer_with_older_types_never_writes_them_back(spark, table_t, tmp_path: Path) -> None:
    a = {"id": s("a"), "qty": n("1")}
    full = sample_exports.write_items_export(tmp_path / "full", "t", [a])
    assert main(["sync", "--table", "t", str(full)]) == 0
    t = get_table("t")
    older = table_types.stored_schema(spark, t)
    assert older is not None and older.get("qty").type.sql() == "bigint"
    assert table_t(modify(a, {**a, "qty": n("1.5")}, 1)) == 0  # adopted: decimal(38,1)
    assert not table_types.store(spark, t, older)  # a writer that read before the rebuild
    kept = table_types.stored_schema(spark, t)
    assert kept is not None and kept.get("qty").type.sql() == "decimal(38,1)"


def test_the_drift_check_before_a_merge_skips_only_batches_seen_clean(
    spark, table_t, tmp_path: Path
) -> None:
    """A `watch` hands the merge the batches it staged and saw no drift in; the drift check
    before the merge reads every other unmerged batch, and a batch the watch merged leaves the
    list."""
    from ingestion.jobs import watch as watching
    from ingestion.maintenance import adopt

    a = {"id": s("a"), "n": n("1")}
    full = sample_exports.write_items_export(tmp_path / "full", "t", [a])
    assert main(["sync", "--table", "t", str(full)]) == 0
    location = tmp_path / "drift"
    write_batch([modify(a, {"id": s("a"), "n": n("1.5")}, 1)], str(location))
    staged = streams.ingest_stream(spark, get_table("t"), str(location), settle_seconds=0)
    assert staged.drift  # 1.5 does not fit the bigint column; nothing adopted yet
    commits = lambda: table_metadata.read(spark, "lake.staging.t").snapshots  # noqa: E731
    handle = lambda: catalog_table.load([get_table("t")], spark)[0]  # noqa: E731
    assert adopt.still_clean(commits(), {staged.batch_id, "unknown"}) == {staged.batch_id}
    skipped = adopt.adopt_before_merge(handle(), known_clean={staged.batch_id})
    assert skipped == [] and column_types(spark, "lake.staging.t")["n"] == "bigint"
    lines = adopt.adopt_before_merge(handle(), known_clean={"another batch"})
    assert any("drift adopted" in line for line in lines)
    assert column_types(spark, "lake.staging.t")["n"] != "bigint"
    # A rebuild decoded the batch's rows again: what was seen at staging no longer holds.
    assert adopt.still_clean(commits(), {staged.batch_id}) == set()

    write_batch([modify(a, {"id": s("a"), "n": n("2.5")}, 2)], str(location))
    progress = watching.Progress()
    options = watching.WatchOptions(stream=str(location), interval=0, settle=0, maintain_every=0)
    done = watching.tick(spark, [get_table("t")], options, 1, progress)
    assert [t.error for t in done] == [None] and done[0].changes == 1
    assert progress.clean == {"t": set()}  # seen clean, then merged: nothing left to skip
    assert final(spark)["a"]["n"] == 2.5


def test_a_sync_does_not_read_again_for_drift_the_batches_it_staged_clean(
    spark, table_t, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sync`` hands its merge the batches it staged with no drift, as a ``watch`` does: the
    drift check before the merge reads only the others (each read is a Spark job over the batch:
    a second at 1M rows)."""
    from ingestion.maintenance import adopt

    read: list[list[str]] = []
    drift_report = adopt.staged_drift.drift_report

    def counted(spark_, table, batches=None):
        read.append(list(batches or []))
        return drift_report(spark_, table, batches)

    monkeypatch.setattr(adopt.staged_drift, "drift_report", counted)
    a = {"id": s("a"), "n": n("1")}
    full = sample_exports.write_items_export(tmp_path / "full", "t", [a])
    assert main(["sync", "--table", "t", str(full)]) == 0
    assert read == []
    later = BASE_TIME.replace(hour=BASE_TIME.hour + 1)
    drifted = sample_exports.write_items_export(
        tmp_path / "again", "t", [{"id": s("a"), "n": n("1.5")}], moment=later, seed=1
    )
    assert main(["sync", "--table", "t", str(drifted)]) == 0
    assert len(read) == 1 and len(read[0]) == 1  # the drifted batch, read before its merge
    assert column_types(spark, "lake.lakehouse.t")["n"] != "bigint"  # adopted, merged
