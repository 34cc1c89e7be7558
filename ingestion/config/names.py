"""Physical names, written once: the catalog, its namespaces and the tables the project owns.

The dbt side reaches the same names through ``source('dynamodb', <table>)`` (staging, see
``models/staging/dynamodb/__sources.yml``) and the ``lakehouse_*`` vars of ``dbt_project.yml``
(the merge log); ``tests/config/test_names.py`` checks that the two agree.
"""

from __future__ import annotations

import os
import re

from ingestion.config.errors import LakehouseError

CATALOG = "lake"  # Spark's catalog name (profiles.yml: spark.sql.catalog.lake)
# The two namespaces are the Glue databases on AWS. An account may already have a database named
# `staging` or `lakehouse`, so each name can come from a variable. The variables are read once,
# at import. Every process of a run gets them from its environment: dbt through
# settings.export_environment, a job on EMR through the driverEnv the submit and the schedules
# set (ingestion/aws/emr.job_environment).
STAGING_VARIABLE = "LAKEHOUSE_STAGING_DATABASE"
FINAL_VARIABLE = "LAKEHOUSE_FINAL_DATABASE"
STAGING = os.environ.get(STAGING_VARIABLE) or "staging"  # change logs, rejects, the merge log
FINAL = os.environ.get(FINAL_VARIABLE) or "lakehouse"  # the final tables Athena reads
# A name that Glue, Athena (lower case only) and Spark all take without quoting.
DATABASE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,254}")
MERGE_LOG = "dynamodb_lakehouse_merges"  # which staged batch was merged when
VERIFY_LOG = "dynamodb_lakehouse_verifies"  # each `verify` run: a table against an export
LEASES = "dynamodb_lakehouse_leases"  # one watch per table across machines (jobs.lease)
REJECTS_SUFFIX = "_rejects"  # staging.<table>_rejects: a table's damaged stream lines
SOURCE = "dynamodb"  # dbt source name of the change logs
NAMESPACES = (STAGING, FINAL)
METRICS_NAMESPACE = "DynamoDBLakehouse"  # CloudWatch: verify's counts, doctor's probe

# The ledger's keys in a staging commit's Iceberg snapshot summary (``catalog.ledger``); the
# merge's macros read three of them through ``vars.lakehouse_summary_keys`` of dbt_project.yml.
SUMMARY_PREFIX = "dynamodb-lakehouse."
SUMMARY_KEYS = {
    name: SUMMARY_PREFIX + key
    for name, key in (
        ("source", "source"),
        ("batch_id", "batch-id"),
        ("kind", "kind"),
        ("table_arn", "table-arn"),
        ("start", "from"),
        ("end", "to"),
        ("ledger", "ledger"),  # JSON list of every entry, written by a rebuild or a maintain
        ("maintained", "maintained"),  # on the ledger checkpoint `maintain` commits
        ("files", "files"),  # a stream batch: its change files, one name per line
        ("rebuilt_from", "rebuilt-from"),  # a rebuild's replace: the snapshot it read
        ("types_before", "types-before"),  # a rebuild's replace: the types kept before it
    )
}


class DatabaseNameError(LakehouseError):
    """A namespace variable names a database that Glue, Athena or Spark would refuse."""


def check_databases() -> None:
    """Refuse names that Glue or Athena would refuse, and a single name used for both."""
    for variable, value in ((STAGING_VARIABLE, STAGING), (FINAL_VARIABLE, FINAL)):
        if not DATABASE_NAME.fullmatch(value):
            raise DatabaseNameError(
                f"{variable}={value!r} is not a database name Glue and Athena both accept: "
                "use lower-case letters, digits and underscores (at most 255 characters, not "
                "starting with a digit)"
            )
    if STAGING == FINAL:
        raise DatabaseNameError(
            f"{STAGING_VARIABLE} and {FINAL_VARIABLE} both name {STAGING!r}: the change logs and "
            "the final tables need separate databases"
        )


def quote(identifier: str) -> str:
    """A Spark SQL identifier, backticks doubled: safe for any name taken from data."""
    return quote_table(identifier)


# The staging table's property that holds the table's column types (``catalog.table_types``).
SCHEMA_PROPERTY = SUMMARY_PREFIX + "schema"


def quote_table(*parts: str) -> str:
    """Spark SQL identifiers joined by dots (a catalog name), each quoted as ``quote`` says."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in parts)


# An entity's final table -> the table entry whose change log holds its changes (a single-table
# design, ingestion.dynamodb.entities), set by every load of the table configuration
# (``tables.load_tables``): ``staging_table`` and the ledger then take either name.
STAGING_OF: dict[str, str] = {}


def staging_table(table: str) -> str:
    """The change log of a DynamoDB table, quoted: ``lake.staging.<table>`` (for an entity's
    final table, its entry's change log)."""
    return quote_table(CATALOG, STAGING, STAGING_OF.get(table, table))


def final_table(table: str) -> str:
    """The final table Athena reads, quoted: ``lake.lakehouse.<table>``."""
    return quote_table(CATALOG, FINAL, table)


def rejects_table(table: str) -> str:
    """Damaged stream lines set aside: ``lake.staging.<table>_rejects``."""
    return quote_table(CATALOG, STAGING, f"{table}{REJECTS_SUFFIX}")


def merge_log_table() -> str:
    return quote_table(CATALOG, STAGING, MERGE_LOG)


def verify_log_table() -> str:
    return quote_table(CATALOG, STAGING, VERIFY_LOG)


def staging_model(table: str) -> str:
    """The dbt staging model over a change log."""
    return f"stg_{SOURCE}__{table}"


def history_table(table: str) -> str:
    """A final table's history (``history: true``, docs/history.md): its model and table name."""
    return f"{table}__history"
