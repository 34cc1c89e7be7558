"""Drift adopted without a manual step: when a batch holds values that do not fit their column
(a ``bigint`` column meets ``3.25``, a 38-digit number), the table's typed columns are derived
again from the staged raw images with types wide enough (``upkeep.rebuild``), and the next merge
rebuilds the final table from the change log (``merge.full_refresh``), so Athena reads the exact
value, not a null, from that merge on. The table option ``adopt_drift: false`` keeps the values
null (listed in ``_drift``) until someone runs ``rebuild``.

Decision: always the rebuild path, never an ``ALTER COLUMN`` promotion alone. A promotion that
Iceberg allows (int -> long, float -> double, a wider decimal of the same scale) widens the
column, but the staged rows that did not fit still hold nulls: they must be derived again from
their images either way, and the project's drift is mostly of kinds Iceberg cannot promote
(``bigint`` -> ``decimal``, a number -> text). Drift is rare; when it happens, one staging
rewrite and one full merge are the price of a right answer.
"""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from ingestion.dynamodb.tables import TableConfig
from ingestion.staging.drift import Drift
from ingestion.upkeep import rebuild

log = logging.getLogger(__name__)


def adopt_drift(
    spark: SparkSession, table: TableConfig, drift: list[Drift] | tuple[Drift, ...]
) -> list[str]:
    """Widen the columns ``drift`` names by rebuilding staging from the images; the summary
    lines (empty when there is no drift or the table's option is off)."""
    if not drift or not table.adopt_drift:
        return []
    attributes = ", ".join(sorted({d.attribute for d in drift}))
    log.info("%s: values that do not fit %s: adopting wider types", table.name, attributes)
    rebuilt = rebuild.rebuild_staging(spark, table)
    changed = ", ".join(rebuilt.changed) or "no type changed"
    return [
        f"{table.name}: drift adopted ({attributes}): staging rebuilt from the images "
        f"({changed}); the next merge rebuilds the final table"
    ]
