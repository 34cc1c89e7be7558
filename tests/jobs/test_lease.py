"""The table lease in the catalog: one `watch` (or `rebuild`) per table across machines.

Two machines share only the catalog; here two owners in one process stand for them (each lease
has its own owner id, and the catalog's compare-and-swap is the only thing they share), and a
`watch` started through the CLI meets a lease held by "another machine".
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from ingestion import cli
from ingestion.dynamodb.tables import get_table
from ingestion.jobs import lease
from ingestion.jobs.table_lock import TableBusy
from ingestion.jobs.watch import WatchOptions, watch

pytestmark = [pytest.mark.slow, pytest.mark.integration]


@pytest.fixture
def short_leases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_LEASE_SECONDS", "4")


def _record(spark, table: str) -> dict | None:
    seen: list[dict | None] = []
    lease._swap(spark, table, lambda current: seen.append(current))  # reads, changes nothing
    return seen[0]


def test_a_watch_stops_when_another_machine_holds_the_table(
    spark, short_leases, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file lock saw only this machine: a second EMR job run watched the same table and
    both staged the same change files."""
    other = lease.hold(spark, "books", "watch")  # the other machine's watch, renewing
    try:
        started = time.monotonic()
        assert (
            cli.main(["watch", "--table", "books", "--stream", str(tmp_path), "--ticks", "1"]) == 2
        )
        err = capsys.readouterr().err
        assert "another watch of table books holds its lease" in err and other.owner in err
        assert time.monotonic() - started < 30
        assert _record(spark, "books")["owner"] == other.owner  # untouched
        other.check()  # still its holder
        # The template's hourly start of the watch: a run that finds it running succeeds.
        assert cli.main(["watch", "--table", "books", "--stream", str(tmp_path), "--if-free"]) == 0
        assert "books: already watched, nothing to do" in capsys.readouterr().out
    finally:
        other.release()
    assert _record(spark, "books") is None


def test_a_lease_not_renewed_is_taken_over_and_its_holder_stops(spark, short_leases) -> None:
    """A holder that died (kill -9, a lost container) frees the table after the lease time; a
    holder that only stalled finds the lease gone and stops at its next tick."""
    stalled = lease.hold(spark, "orders", "watch")
    stalled._stop.set()  # stops renewing, as a dead or frozen process does
    stalled._thread.join()
    lines: list[str] = []
    started = time.monotonic()
    taker = lease.hold(spark, "orders", "watch", report=lines.append)
    try:
        assert 2 <= time.monotonic() - started < 20  # waited for the expiry, not forever
        assert lines and stalled.owner in lines[0] and "taken over" in lines[0]
        assert _record(spark, "orders")["owner"] == taker.owner
        assert not lease._swap(spark, "orders", stalled._renewed)  # its next renewal fails
        with pytest.raises(lease.LeaseLost, match="taken by"):
            stalled.check()
        options = WatchOptions(stream="/nowhere", ticks=3)
        with pytest.raises(lease.LeaseLost):
            watch(spark, [get_table("orders")], options, report=lambda _: None, guard=stalled.check)
    finally:
        taker.release()


def test_two_machines_starting_at_once_get_one_lease(spark, short_leases) -> None:
    """The catalog's compare-and-swap decides: Iceberg's own commit retry would re-apply the
    second write on top of the first and let both believe they hold the table."""
    results: list[object] = []
    barrier = threading.Barrier(2)

    def start() -> None:
        barrier.wait()
        try:
            results.append(lease.hold(spark, "books", "watch", report=lambda _: None))
        except TableBusy as exc:
            results.append(exc)

    threads = [threading.Thread(target=start) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    held = [r for r in results if isinstance(r, lease.Lease)]
    assert len(held) == 1 and len(results) == 2, results
    assert _record(spark, "books")["owner"] == held[0].owner
    held[0].release()


def test_renewals_keep_a_bounded_number_of_metadata_files(spark) -> None:
    """Every renewal committed a metadata.json that nothing removed: 2,880 a day for one watch
    at the default lease time. (Files this test did not write, such as a losing concurrent
    commit's of another test, are not its to count.)"""
    held = lease.hold(spark, "books", "watch", report=lambda _: None)
    location = spark.sql(f"describe table extended {lease.HOLDER}").where("col_name = 'Location'")
    folder = Path(location.first()["data_type"].removeprefix("file:")) / "metadata"
    before = set(folder.glob("*.metadata.json"))
    try:
        for _ in range(30):  # thirty renewals
            assert lease._swap(spark, "books", held._renewed)
    finally:
        held.release()
    written = set(folder.glob("*.metadata.json")) - before
    assert 0 < len(written) <= int(lease.KEEP_METADATA["write.metadata.previous-versions-max"]) + 1
