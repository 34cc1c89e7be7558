{% macro dynamodb_new_batches(table) -%}
  {%- set given = dynamodb_run_var('dynamodb_batches') or {} -%}
  {%- if table in given -%}{{ return(given[table]) }}{%- endif -%}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {%- set logged = adapter.get_relation(database=none, schema=dynamodb_staging_schema(), identifier=var('lakehouse_merge_log')) -%}
  {#- A batch's id is in its commit's summary or, once `maintain` expired that commit, in the
      ledger a later commit carries forward (the summary key `ledger`, a JSON list). -#}
  {%- set query -%}
    select distinct batch_id from (
      select summary[{{ _dynamodb_summary_key('batch_id') }}] as batch_id
      from {{ dynamodb_staging_relation(table) }}.snapshots
      union all
      select carried.batch_id
      from {{ dynamodb_staging_relation(table) }}.snapshots
      lateral view explode(
        from_json(summary[{{ _dynamodb_summary_key('ledger') }}], 'array<struct<batch_id:string>>')) as carried
    ) as batches
    where batch_id is not null and batch_id != ''
    {%- if logged %}
      and batch_id not in (
        select batch_id from {{ dynamodb_merge_log() }} where table_name = '{{ table }}')
    {%- endif %}
  {%- endset -%}
  {{ return(run_query(query).columns[0].values() | list) }}
{%- endmacro %}
