"""One process at a time per table on this machine, for work that must not interleave with a
stream ingest: ``watch`` (for its whole life) and ``rebuild`` (while it replaces staging).

The lock is ``<home>/locks/<table>.lock``, taken with ``flock``: the kernel frees it when the
process ends, kill -9 included. Processes on other machines are not seen here (two EMR job runs):
``jobs.lease`` keeps a lease in the catalog for that, and ``rebuild`` also checks after its commit
that no other commit landed while it ran (``maintenance.rebuild``). ``jobs.guard`` takes this lock
and the lease together.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from ingestion.config.errors import LakehouseError

WHY = {
    "watch": "two would stage the same change files twice",
    "rebuild": "rebuild replaces the staging table, and a commit made meanwhile would be lost",
}


class TableBusy(LakehouseError):
    """Another process on this machine holds the table's lock."""


def hold(home: Path, table: str, work: str) -> IO[str]:
    """Take the table's lock for ``work`` (``watch`` or ``rebuild``) or raise ``TableBusy``
    naming who holds it; close the returned handle to free it."""
    path = home / "locks" / f"{table}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        pid, _, holder = (handle.read().strip() or "unknown").partition(" ")
        handle.close()
        holder = holder or "watch"
        raise TableBusy(
            f"another {holder} of table {table} is running on this machine (pid {pid}, lock "
            f"{path}): {WHY.get(holder if work == holder else work, WHY['watch'])}; stop it first"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()} {work}")
    handle.flush()
    return handle
