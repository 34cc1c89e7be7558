"""What a merge's data tests read: the batches whose touched keys each table's tests look at
(``test_scope``). The test reads those keys' rows itself, in one query per final table
(macros/tests/dynamodb_final_table.sql)."""

from __future__ import annotations

from ingestion.catalog.table import Table
from ingestion.sources import manifest


def test_scope(
    tables: list[Table],
    batches: dict[str, list[str]],
    refreshed: set[str],
    also_test: dict[str, list[str]],
) -> dict[str, list[str]]:
    """The batches whose touched keys each table's data tests look at; a table left out is
    tested whole: after a full refresh, and when a full export is among its batches (its
    re-baseline removes keys it does not hold, which no batch touches)."""
    scope = {}
    for table in tables:
        tested = [*also_test.get(table.name, []), *batches[table.name]]
        kinds = {e.batch_id: e.kind for e in table.ledger}
        if table.name in refreshed or any(kinds.get(b) == manifest.FULL for b in tested):
            continue
        scope[table.name] = tested
    return scope
