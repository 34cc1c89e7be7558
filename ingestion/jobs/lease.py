"""One ``watch`` (or ``rebuild``) per table across machines: a lease kept in the catalog.

``table_lock`` stops a second process on the same machine; two EMR job runs share no machine,
only the catalog. So the lease lives there, as a property of a small Iceberg table
(``staging.dynamodb_lakehouse_leases``), written with the catalog's own compare-and-swap: a new
metadata version is committed against the version that was read, and the catalog (Glue's
optimistic table version, the JDBC catalog's conditional update) refuses it if another commit
landed in between. Iceberg's own commit retries are bypassed on purpose: they re-apply a change
to the newer version, which would let two processes both "win".

A holder renews its lease every ``ttl / 4`` seconds from a thread. A lease not renewed for
``ttl`` seconds (its process died, kill -9 or a lost container) is taken over; a lease that
keeps being renewed means a live holder, and the newcomer stops with ``TableBusy``. A holder
that finds its lease taken (it stalled longer than ``ttl``) stops at its next tick.

Decision: the catalog, not a DynamoDB lock table: it is already shared by every process of a
deploy, locally and on AWS, and needs no other resource, permission or test double.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ingestion.config import names
from ingestion.config.errors import LakehouseError
from ingestion.jobs.table_lock import WHY, TableBusy
from ingestion.spark import java_errors

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

HOLDER = names.quote_table(names.CATALOG, names.STAGING, names.LEASES)
DEFAULT_TTL = 120.0


class CatalogBusy(LakehouseError):
    """The lease could not be written: other commits kept the catalog busy."""


class LeaseLost(LakehouseError):
    """Another process took this process's lease (it was not renewed in time)."""


def ttl_seconds() -> float:
    return float(os.environ.get("LAKEHOUSE_LEASE_SECONDS", DEFAULT_TTL))


# Every renewal commits a metadata.json (2,880 a day for one watch at the default ttl): keep
# the last few and delete the rest at each commit, set by every swap so that a holder table
# created before these settings gets them too.
KEEP_METADATA = {
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "10",
}


def _property(table: str) -> str:
    return f"lease.{table}"


class Lease:
    """A held lease; ``check()`` raises ``LeaseLost`` once another process has taken it."""

    def __init__(self, spark: SparkSession, table: str, work: str, ttl: float) -> None:
        self.spark, self.table, self.work, self.ttl = spark, table, work, ttl
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def record(self) -> dict[str, Any]:
        return {"owner": self.owner, "work": self.work, "expires": time.time() + self.ttl}

    def start_renewing(self) -> None:
        self._thread = threading.Thread(target=self._renew, name=f"lease {self.table}", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl / 4):
            try:
                if not _swap(self.spark, self.table, self._renewed):
                    return
            except Exception as exc:  # a catalog hiccup: the next renewal tries again
                log.warning("lease of %s not renewed: %s", self.table, exc)

    def _renewed(self, current: dict[str, Any] | None) -> dict[str, Any] | None:
        if current is None or current["owner"] != self.owner:
            holder = current["owner"] if current else "nobody"
            self.lost = f"the lease of table {self.table} was taken by {holder}"
            return None
        return self.record()

    def check(self) -> None:
        if self.lost:
            raise LeaseLost(f"{self.lost}: this {self.work} stops (it stalled for {self.ttl:g}s)")

    def release(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=30)
        try:
            _swap(self.spark, self.table, self._released)
        except Exception as exc:  # the lease then expires by itself within its ttl
            log.warning(
                "lease of %s not released (it expires in %gs): %s", self.table, self.ttl, exc
            )

    def _released(self, current: dict[str, Any] | None) -> dict[str, Any] | None:
        return {} if current and current["owner"] == self.owner else None


def hold(
    spark: SparkSession,
    table: str,
    work: str,
    ttl: float | None = None,
    report: Callable[[str], Any] = print,
) -> Lease:
    """Take the table's lease for ``work`` and keep it renewed, or raise ``TableBusy``."""
    lease = Lease(spark, table, work, ttl or ttl_seconds())
    spark.sql(f"create table if not exists {HOLDER} (note string) using iceberg")
    seen: dict[str, Any] | None = None
    while True:
        current: dict[str, Any] | None = None

        def take(existing: dict[str, Any] | None) -> dict[str, Any] | None:
            nonlocal current
            current = existing
            if existing is None or existing["expires"] < time.time():
                return lease.record()
            return None

        if _swap(spark, table, take):
            lease.start_renewing()
            return lease
        assert current is not None
        if seen is not None and current["expires"] != seen["expires"]:
            why = WHY.get(current["work"] if work == current["work"] else work, WHY["watch"])
            raise TableBusy(
                f"another {current['work']} of table {table} holds its lease ({current['owner']}, "
                f"renewed until {time.strftime('%H:%M:%S', time.gmtime(current['expires']))} "
                f"UTC): {why}; stop it first"
            )
        if seen is None:
            report(
                f"{table}: the lease is held by {current['owner']} ({current['work']}); taken over "
                f"if not renewed within {current['expires'] - time.time():.0f}s"
            )
        seen = current
        time.sleep(min(lease.ttl / 4, max(0.5, current["expires"] - time.time() + 0.1)))


def _swap(
    spark: SparkSession,
    table: str,
    change: Callable[[dict[str, Any] | None], dict[str, Any] | None],
) -> bool:
    """Read the table's lease record, ``change(record)`` it (None: leave it, False is returned;
    ``{}``: remove it) and commit against the version read; retried on a concurrent commit."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    iceberg = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, HOLDER)
    operations = iceberg.operations()
    for _ in range(20):
        base = operations.refresh()
        properties = dict(base.properties())
        text = properties.get(_property(table))
        wanted = change(json.loads(text) if text else None)
        if wanted is None:
            return False
        if wanted:
            properties[_property(table)] = json.dumps(wanted)
        else:
            properties.pop(_property(table), None)
        properties.update(KEEP_METADATA)
        java_map = jvm.java.util.HashMap()
        for key, value in properties.items():
            java_map.put(key, value)
        try:
            operations.commit(base, base.replaceProperties(java_map))
            return True
        except Exception as exc:  # Py4JJavaError wrapping Iceberg's CommitFailedException
            if not java_errors.caused_by(exc, java_errors.COMMIT_FAILED):
                raise
            time.sleep(0.05)
    raise CatalogBusy(
        f"the lease of table {table} could not be written: the catalog was busy; run it again"
    )
