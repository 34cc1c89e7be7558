{#-
  Which staged changes a merge applies, decided by COMMIT ORDER, never by a timestamp column.

  The new batches are the ledger's batches (the staging table's snapshot summaries) that the merge
  log (dynamodb_merge_log()) does not hold yet. `ddb-lakehouse merge` computes them,
  passes them as `vars: {dynamodb_batches: {<table>: [...]}}` and records them in the merge log
  after dbt succeeds; a plain `dbt run` computes the same list itself (and re-applies it on the next
  run: harmless, see below).

  For every key touched by a new batch, the merge looks at ALL of that key's staged changes, not only
  the new ones: the latest one wins. So a late or duplicate older change can never bring a deleted
  item back (the delete is still the key's latest change), and re-applying a batch changes nothing.
-#}
{% macro dynamodb_new_batches(table) -%}
  {%- set given = var('dynamodb_batches', {}) -%}
  {%- if table in given -%}{{ return(given[table]) }}{%- endif -%}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {%- set logged = adapter.get_relation(database=none, schema=var('lakehouse_staging_schema'), identifier=var('lakehouse_merge_log')) -%}
  {#- A batch's id is in its commit's summary or, once `maintain` expired that commit, in the
      ledger a later commit carries forward (`dynamodb-lakehouse.ledger`, a JSON list). -#}
  {%- set query -%}
    select distinct batch_id from (
      select summary['dynamodb-lakehouse.batch-id'] as batch_id
      from {{ dynamodb_staging_relation(table) }}.snapshots
      union all
      select carried.batch_id
      from {{ dynamodb_staging_relation(table) }}.snapshots
      lateral view explode(
        from_json(summary['dynamodb-lakehouse.ledger'], 'array<struct<batch_id:string>>')) as carried
    ) as batches
    where batch_id is not null and batch_id != ''
    {%- if logged %}
      and batch_id not in (
        select batch_id from {{ dynamodb_merge_log() }} where table_name = '{{ table }}')
    {%- endif %}
  {%- endset -%}
  {{ return(run_query(query).columns[0].values() | list) }}
{%- endmacro %}

{% macro dynamodb_quoted_list(values) -%}
  {%- for value in values -%}'{{ value | replace("\\", "\\\\") | replace("'", "\\'") }}'{{ ", " if not loop.last }}{%- endfor -%}
{%- endmacro %}

{% macro dynamodb_changes_to_merge(table, relation) -%}
  {%- set keys = [] -%}
  {%- for key in dynamodb_key_columns(table) -%}{%- do keys.append(lakehouse_quote(key)) -%}{%- endfor -%}
  {%- if is_incremental() -%}
    {%- set batches = dynamodb_new_batches(table) -%}
    {%- if batches | length == 0 %}
select * from {{ relation }} where false
    {%- else %}
select * from {{ relation }}
where ({{ keys | join(', ') }}) in (
    select {{ keys | join(', ') }} from {{ relation }}
    where `_batch_id` in ({{ dynamodb_quoted_list(batches) }})
)
    {%- endif -%}
  {%- else %}
select * from {{ relation }}
  {%- endif -%}
{%- endmacro %}

{#-
  A full export re-baselines the table: an item missing from it was deleted before its export
  time. Its version (the export time) is the latest full export version among the new batches
  (or, for a full build, among all staged rows); rows older than it that it does not hold go.
-#}
{% macro dynamodb_baseline_version(table, relation, batches=none) -%}
  {%- if not execute -%}{{ return(none) }}{%- endif -%}
  {{ return(run_query(dynamodb_newest_full_export_sql(relation, batches)).columns[0].values()[0]) }}
{%- endmacro %}
