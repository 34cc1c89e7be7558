"""Drift adopted without a manual step: when a batch holds values that do not fit their column (a
``bigint`` column meets ``3.25``, a 38-digit number), the table's typed columns are derived again
from the staged raw images with types wide enough (``maintenance.rebuild``), and the next merge
rebuilds the final table from the change log (``merge.full_refresh``), so Athena reads the exact
value, not a null, from that merge on. The table option ``adopt_drift: false`` keeps the values null
(listed in ``_drift``) until someone runs ``rebuild``.

Decision: always the rebuild path, never an ``ALTER COLUMN`` promotion alone. A promotion that
Iceberg allows (int -> long, float -> double, a wider decimal of the same scale) widens the
column, but the staged rows that did not fit still hold nulls: they must be derived again from
their images either way, and the project's drift is mostly of kinds Iceberg cannot promote
(``bigint`` -> ``decimal``, a number -> text). Drift is rare; when it happens, one staging
rewrite and one full merge are the price of a right answer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager, nullcontext

from pyspark.sql import SparkSession

from ingestion.catalog import entity_types, ledger, table_types
from ingestion.catalog.table import Table
from ingestion.catalog.table_metadata import Snapshot
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb.tables import TableConfig
from ingestion.maintenance import entity_moves, rebuild
from ingestion.schema import schema_file, types
from ingestion.spark import out_of_memory
from ingestion.staging import drift as staged_drift
from ingestion.staging.drift import Drift

log = logging.getLogger(__name__)


class AdoptionError(LakehouseError):
    """Drift that cannot be adopted as detected: its batch is staged and not merged until a
    person declares the attribute's type."""


def declared_in_force(spark: SparkSession, table: TableConfig) -> set[tuple[str, str]]:
    """(entity table, attribute) of each type a person declared in ``schemas/<table>.json`` that
    staging already holds as declared (entity "" for a table without a rule; a single-table
    design's declarations are per entity, in its section). A declaration staging does not hold
    yet (written after the attribute was staged, the fix an ``AdoptionError`` asks for) is
    applied by the rebuild."""
    current = table_types.current_schema(spark, table)
    declared: set[tuple[str, str]] = set()
    for part in entity_types.entity_tables(table) if table.entities else [table]:
        found = schema_file.table_schema_file(part)
        kept = current.entity(part.name) if current and table.entities else current
        held = {a.name: a.type.sql() for a in kept.attributes} if kept else {}
        entity = part.name if table.entities else ""
        declared |= {
            (entity, name)
            for name, entry in (found.overrides.items() if found else ())
            if schema_file.is_declared(entry)
            and name in found.typed  # type: ignore[union-attr]
            and held.get(name) == found.typed[name].type.sql()  # type: ignore[union-attr]
        }
    return declared


Guard = Callable[[], AbstractContextManager[object]]


def adopt_drift(
    spark: SparkSession, table: TableConfig, drift: Sequence[Drift], guard: Guard = nullcontext
) -> list[str]:
    """Widen the columns ``drift`` names by rebuilding staging from the images; the summary
    lines (empty when there is no drift or the table's option is off). A declared type is never
    changed: its misfits stay null (in ``_drift``, whole in ``_rest``) and are reported.
    Raises ``AdoptionError`` when the wider types cannot be derived (nothing changed then).
    The rebuild runs inside ``guard()``: the table's lock and lease (``jobs.guard``), so no
    other rebuild, adoption or ``watch`` changes staging meanwhile; a ``watch``, which holds
    them for its life, passes none."""
    if not drift or not table.adopt_drift:
        return []
    declared = declared_in_force(spark, table)
    lines = [
        f"{table.name}: {d.rows} value(s) of {d.attribute!r} do not fit the type declared in "
        f"{schema_file.schema_path(table.name)} (e.g. {d.example}): null in its column, whole "
        "in _rest, listed in _drift; declare a wider type and run rebuild to keep them"
        for d in drift
        if (d.entity, d.attribute) in declared
    ]
    adoptable = sorted({d.attribute for d in drift if (d.entity, d.attribute) not in declared})
    if not adoptable:
        return lines
    attributes = ", ".join(adoptable)
    log.info("%s: values that do not fit %s: adopting wider types", table.name, attributes)
    kept = table_types.current_schema(spark, table)  # to name the likely attribute on failure
    try:
        with guard(), out_of_memory.explained(table.name, "drift adoption", kept):
            rebuilt = rebuild.rebuild_staging(spark, table, only_if_changed=True)
    except types.SchemaError as exc:
        culprit = exc.attribute if exc.attribute in adoptable else adoptable[0]
        example = json.dumps({culprit: {"type": "string"}})
        where = '"attributes"'
        if table.entities is not None:  # a single-table design declares per entity
            entity = next((d.entity for d in drift if d.attribute == culprit), "<entity table>")
            where = f'"entities": {{"{entity}": {{"attributes": ...}}}}'
        raise AdoptionError(
            f"{table.name}: the drift in {attributes} cannot be adopted: {exc}. Its batch is "
            "staged and is not merged until this is fixed: declare the type in "
            f"{schema_file.schema_path(table.name)} (e.g. {example[1:-1]} in its "
            f"{where} keeps it as JSON text), then run the same command again"
        ) from exc
    # An attribute whose type re-detection did not change holds misfits under a type declared
    # inside it (re-detection keeps those): reported, never called adopted.
    widened = {c.split(":", 1)[0].rsplit(".", 1)[-1] for c in (rebuilt.changed if rebuilt else ())}
    misfits = [
        f"{table.name}: {d.rows} value(s) of {d.attribute!r} do not fit a type declared "
        f"inside it in {schema_file.schema_path(table.name)} (e.g. {d.example}; re-detecting "
        "every staged image changes no type of it): null in its column, whole in _rest, "
        "listed in _drift; declare a wider type and run rebuild to keep them"
        for d in drift
        if d.attribute in adoptable and d.attribute not in widened
    ]
    if rebuilt is None:  # no type changed at all: nothing was rewritten
        return lines + misfits
    adopted = ", ".join(a for a in adoptable if a in widened) or attributes
    changed = ", ".join(rebuilt.changed) or "no type changed"
    return (
        lines
        + misfits
        + [
            f"{table.name}: drift adopted ({adopted}): staging rebuilt from the images "
            f"({changed}); the next merge rebuilds the final table"
        ]
    )


def adopt_before_merge(
    table: Table, guard: Guard = nullcontext, known_clean: Collection[str] = ()
) -> list[str]:
    """Before a merge: the restage of a rebuild killed after its replace done
    (``rebuild.recover_lost_commits``), rows staged under the earlier key rule moved to their
    entity (``entity_moves``), and drift in batches staged and not merged yet adopted
    (a run that staged them and failed to adopt, or was killed first); the summary lines. A
    merge never writes such a batch with its values null while the table adopts drift.
    ``known_clean``: batches this process staged and saw no drift in (its ``watch``): not read
    again (their drift report is a Spark job on their rows, a tenth of a second every tick).
    Each step is asked only when the handle's reads say it may have work; after one that
    changed staging, the handle reads it again."""
    spark, config = table.spark, table.config
    assert spark is not None, "a handle read through Spark"
    commits = table.change_log.snapshots if table.change_log is not None else []
    lines = []
    if any(rebuild.REBUILT_FROM in c.summary for c in commits):
        lines += [
            f"{table.name}: batch {batch} was overwritten by a rebuild that stopped before "
            "staging it again: staged again"
            for batch in rebuild.recover_lost_commits(spark, config)
        ]
    if config.entities is not None and config.entities.by == "key":
        lines += entity_moves.move_before_merge(spark, config, guard)
    if lines:
        table.refresh()
    if not config.adopt_drift:
        return lines
    clean = still_clean(commits, known_clean)
    unmerged = {b for final in table.finals for b in final.new_batches}
    pending = sorted(unmerged - clean)
    if not pending:
        return lines
    found = staged_drift.drift_report(spark, table, pending)
    adopted = adopt_drift(spark, config, found, guard) if found else []
    if adopted:
        table.refresh()
    return lines + adopted


def still_clean(commits: list[Snapshot], seen_clean: Collection[str]) -> set[str]:
    """Of the batches seen clean when staged, those whose rows are still the staged ones: first
    committed (among the change log's ``commits``) after the table's last rebuild (a rebuild,
    here or by the restage of one that was stopped, decodes the rows it restages again, with
    the types it detected)."""
    if not seen_clean:
        return set()
    rebuilt = max(
        (s.sequence_number for s in commits if rebuild.REBUILT_FROM in s.summary), default=-1
    )
    first: dict[str, int] = {}
    for snapshot in sorted(commits, key=lambda s: s.sequence_number):
        batch = snapshot.summary.get(ledger.BATCH, "")
        if batch in seen_clean:
            first.setdefault(batch, snapshot.sequence_number)
    return {batch for batch, sequence in first.items() if sequence > rebuilt}
