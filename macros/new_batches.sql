{#-
  The batches a model merges: the ledger's batches (the staging table's snapshot summaries) that
  the merge log does not hold for `logged_as` (the model's name in the merge log: the final
  table's, or its history's, which keeps rows of its own).

  `ddb-lakehouse merge` hands them over (dynamodb_run_var) and records them itself after `dbt
  run` and `dbt test`. A plain `dbt run` works them out here once per model and PINS them (a
  setting of dbt's Spark session, keyed by the run's invocation id): every later call in the same
  run (the changes, the strategy's baseline, the history's probe) and the model's post-hook,
  which records them in the merge log (macros/merge_log.sql), see the same list, never a batch an
  ingest committed meanwhile. So what a plain `dbt run` records is what it merged, and the next
  run with nothing new merges nothing.
-#}
{% macro dynamodb_new_batches(table, logged_as=none) -%}
  {%- set given = dynamodb_run_var('dynamodb_batches') or {} -%}
  {%- if table in given -%}{{ return(given[table]) }}{%- endif -%}
  {%- if not dynamodb_building() -%}{{ return([]) }}{%- endif -%}
  {%- set logged_as = logged_as or table -%}
  {%- set pinned = dynamodb_pinned_batches(logged_as) -%}
  {%- if pinned is not none -%}{{ return(pinned) }}{%- endif -%}
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
        select batch_id from {{ dynamodb_merge_log() }} where table_name = '{{ logged_as }}')
    {%- endif %}
  {%- endset -%}
  {%- set batches = run_query(query).columns[0].values() | list -%}
  {%- do run_query('set ' ~ _dynamodb_pin(logged_as) ~ ' = `' ~ (tojson(batches) | replace('`', '``')) ~ '`') -%}
  {{ return(batches) }}
{%- endmacro %}

{#- The batches this run pinned for `logged_as` (above), or none when it pinned none. -#}
{% macro dynamodb_pinned_batches(logged_as) -%}
  {%- set value = run_query('set ' ~ _dynamodb_pin(logged_as)).rows[0][1] | string -%}
  {{ return(fromjson(value) if value.startswith('[') else none) }}
{%- endmacro %}

{#- Forget the pin of `logged_as` (its post-hook recorded it). -#}
{% macro dynamodb_unpin_batches(logged_as) -%}
  {%- do run_query('reset ' ~ _dynamodb_pin(logged_as)) -%}
{%- endmacro %}

{% macro _dynamodb_pin(logged_as) -%}
`lakehouse-pinned-batches.{{ invocation_id }}.{{ logged_as }}`
{%- endmacro %}
