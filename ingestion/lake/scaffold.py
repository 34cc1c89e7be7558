"""The dbt files of one DynamoDB table: staging view, final model and its schema YAML.

The attribute columns are not listed: they come from the table's schema file (schemas/<table>.json)
and reach the models through ``select *``, so a new attribute needs no model change.

``add-table`` writes them for a user's table; the committed ``books`` and ``orders`` files are
exactly what this module renders (a test checks it), so every table is built the same way.
"""

from __future__ import annotations

from pathlib import Path

from ingestion.dynamodb.tables import TableConfig

STAGING_SQL = """\
with

source as (

    select * from {{{{ source('dynamodb', '{table}') }}}}

),

final as (

    select * from source

)

select * from final
"""

STAGING_YML = """\
version: 2

models:
  - name: stg_dynamodb__{table}
    description: >
      The change log of the DynamoDB table `{table}`: one row per ingested change (export item or
      stream record), typed columns plus metadata. A view over the staging Iceberg table.
"""

FINAL_SQL = """\
{{{{ config(unique_key=dynamodb_key_columns('{table}'), partition_by=dynamodb_partition_by('{table}')) }}}}

with

changes as (

    {{{{ dynamodb_changes_to_merge('{table}', ref('stg_dynamodb__{table}')) }}}}

),

latest_changes as (

    {{{{ dynamodb_latest_change_per_key('changes', dynamodb_key_columns('{table}')) }}}}

),

final as (

    select * from latest_changes
    {{% if not is_incremental() %}}
    where `_operation` not in {{{{ dynamodb_delete_operations('{table}') }}}}
      and `_version` >= (
        select coalesce(max(`_version`), 0) from {{{{ ref('stg_dynamodb__{table}') }}}}
        where `_operation` = 'snapshot'
      )
    {{% endif %}}

)

select * from final
"""


def _key_tests(table: TableConfig) -> tuple[str, str]:
    """Column-level tests for a single key, a model-level combination test for two; and the
    tests of the final table against its change log."""
    against_staging = "".join(
        f"\n      - {test}:\n          arguments:\n            table: {table.name}"
        for test in ("dynamodb_no_deleted_keys", "dynamodb_rows_match_latest_changes")
    )
    if table.sort_key is None:
        return "\n        data_tests: [unique, not_null]", "\n    data_tests:" + against_staging
    keys = ", ".join(k.column for k in table.keys)
    model_tests = (
        "\n    data_tests:\n      - unique_combination_of_columns:\n"
        f"          arguments:\n            combination_of_columns: [{keys}]" + against_staging
    )
    return "\n        data_tests: [not_null]", model_tests


def final_yml(table: TableConfig) -> str:
    column_tests, model_tests = _key_tests(table)
    lines = [
        "version: 2",
        "",
        "models:",
        f"  - name: {table.name}",
        "    description: >",
        f"      The DynamoDB table `{table.name}` as of its latest ingested change: one row per item,",
        f"      deletes applied. Iceberg v2, merge-on-read, queried by Athena through the catalog.{model_tests}",
        "    columns:",
    ]
    roles = {table.partition_key.name: "partition key"}
    if table.sort_key:
        roles[table.sort_key.name] = "sort key"
    for key in table.keys:
        lines.append(f"      - name: {key.column}")
        lines.append(
            f"        description: DynamoDB {roles[key.name]} `{key.name}` ({key.descriptor})."
            + column_tests
        )
    lines += [
        "      - name: _operation",
        "        description: The last change applied to the row (snapshot, insert, update, upsert; ttl_delete when the table keeps TTL expiries).",
        "        data_tests: [not_null]",
        "      - name: _version",
        "        description: Version of the row (DynamoDB write time or export time, epoch microseconds; for a stream change the end of its second).",
        "        data_tests: [not_null]",
        "      - name: _sequence",
        "        description: The stream record's SequenceNumber (zero-padded to 40 digits) that orders changes within one version; null for exports.",
        "      - name: _source",
        "        description: ARN of the export (or stream file) the row's version came from.",
        "      - name: _source_file",
        "        description: The data file the row's version came from.",
        "      - name: _batch_id",
        "        description: The ingestion batch that staged the row's version.",
        "      - name: _ingested_at",
        "        description: When that batch was ingested (UTC).",
        "      - name: _image",
        "        description: The item's DynamoDB JSON as received (every attribute, whatever its column).",
        "      - name: _drift",
        "        description: Attributes whose value did not fit their column (null there, whole in _image).",
    ]
    return "\n".join(lines) + "\n"


def files_for(table: TableConfig, root: Path) -> dict[Path, str]:
    """Path -> content of the dbt files of ``table``."""
    return {
        root / "models/staging/dynamodb" / f"stg_dynamodb__{table.name}.sql": STAGING_SQL.format(
            table=table.name
        ),
        root / "models/staging/dynamodb" / f"stg_dynamodb__{table.name}.yml": STAGING_YML.format(
            table=table.name
        ),
        root / "models/marts" / f"{table.name}.sql": FINAL_SQL.format(table=table.name),
        root / "models/marts" / f"{table.name}.yml": final_yml(table),
    }
