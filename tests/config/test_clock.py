"""Epoch microseconds have one definition (``clock.epoch_micros``): aware UTC everywhere, so a
naive time means the same instant whatever the machine's time zone (the staging's ingest time
read it as UTC, the manifest's version as local time before)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from ingestion.config import clock
from ingestion.sources.manifest import FULL, INCREMENTAL, Export

NEW_YEAR_2026_MICROS = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z


@pytest.fixture
def new_york(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    assert time.timezone == 5 * 3600  # the zone really is in force in this process
    yield
    monkeypatch.undo()
    time.tzset()


def _export(**times: datetime | None) -> Export:
    kind = FULL if times.get("export_time") else INCREMENTAL
    return Export(
        folder=Path("/exports/AWSDynamoDB/01"),  # type: ignore[arg-type]
        export_arn="arn:aws:dynamodb:eu-west-1:1:table/t/export/01",
        table_arn="arn:aws:dynamodb:eu-west-1:1:table/t",
        export_type=kind,
        output_view=None,
        export_time=times.get("export_time"),
        export_from_time=times.get("export_from_time"),
        export_to_time=times.get("export_to_time"),
        item_count=0,
        files=(),
    )


def test_epoch_micros_is_exact_and_utc(new_york: None) -> None:
    moment = datetime(2026, 1, 1, 0, 0, 0, 1)
    assert clock.epoch_micros(moment) == NEW_YEAR_2026_MICROS + 1  # naive: UTC, not New York
    assert clock.epoch_micros(moment.replace(tzinfo=UTC)) == NEW_YEAR_2026_MICROS + 1
    paris = timezone(timedelta(hours=1))
    assert clock.epoch_micros(datetime(2026, 1, 1, 1, tzinfo=paris)) == NEW_YEAR_2026_MICROS
    assert clock.epoch_micros(datetime(1969, 12, 31, 23, 59, 59, 999_999)) == -1


def test_an_exports_version_is_the_same_instant_in_any_time_zone(new_york: None) -> None:
    naive, aware = datetime(2026, 1, 1), datetime(2026, 1, 1, tzinfo=UTC)
    assert _export(export_time=naive).version_micros == NEW_YEAR_2026_MICROS
    assert _export(export_time=aware).version_micros == NEW_YEAR_2026_MICROS
    window = _export(export_from_time=naive - timedelta(hours=1), export_to_time=naive)
    assert window.version_micros == NEW_YEAR_2026_MICROS - 1
