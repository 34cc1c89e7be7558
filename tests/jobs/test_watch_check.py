"""A `watch`'s whole-table check (``WatchOptions.check_every``): when it runs, and that a failed
one is reported and tried again an hour later, not on every tick. No Spark: the check itself
(runner.full_check, real dbt in tests/staging/test_streams.py) is replaced by one that fails."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ingestion.dynamodb.tables import get_table
from ingestion.jobs import watch
from ingestion.merge import dbt_process, runner


def test_a_failed_whole_table_check_is_reported_and_tried_again_an_hour_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[bool] = []

    def failing(spark, tables, artifacts=True):
        calls.append(artifacts)
        raise dbt_process.DbtError("`dbt test --select stg_dynamodb__books+` failed")

    now = [1000.0]
    monkeypatch.setattr(runner, "full_check", failing)
    monkeypatch.setattr(watch.time, "monotonic", lambda: now[0])
    options = watch.WatchOptions(stream="/s", check_every=timedelta(days=1))
    progress, books = watch.Progress(), get_table("books")

    def check() -> str | None:
        return watch._check(None, books, options, progress)[1]  # type: ignore[arg-type]

    assert check() is None and calls == []  # not at the start: a day after it
    now[0] += 86_399
    assert check() is None and calls == []
    now[0] += 1
    assert (check() or "").startswith("whole-table check: `dbt test") and calls == [False]
    now[0] += 60
    assert check() is None and calls == [False]  # not on the next tick
    now[0] += 3_600
    assert check() is not None and calls == [False, False]  # an hour later
    assert watch._check(
        None, books, watch.WatchOptions(stream="/s", check_every=None), progress
    ) == (0.0, None)  # type: ignore[arg-type]
