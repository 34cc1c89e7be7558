{#-
  True while a model builds its final table from scratch (first build or full refresh) and its
  change log holds exactly one batch, a full export, and no carried ledger: every key has one
  change (DynamoDB exports an item once; the final table's test, `dynamodb_final_table`, proves it
  after the build: its keys once)
  and every row stays (a snapshot is no delete and is the baseline itself). Then the build needs
  neither the per-key aggregation nor the baseline query: it copies the export's rows. The
  first load of a table, the most expensive merge, does only what it needs. Anything else (a
  batch without a recorded kind, streams, incrementals, a ledger carried by `maintain`) takes
  the general path.
-#}
{% macro dynamodb_one_full_export() -%}
  {%- if not execute or model.resource_type != 'model' or is_incremental() -%}{{ return(false) }}{%- endif -%}
  {%- set table = this.identifier -%}
  {#- An entity's final table takes some of its change log's rows: never a copy of it. -#}
  {%- if table not in var('dynamodb_tables', {}) or dynamodb_entity(table) -%}{{ return(false) }}{%- endif -%}
  {#- No change log yet (`dbt compile` or sqlfluff on a fresh lakehouse): the general path. -#}
  {%- if adapter.get_relation(database=none, schema=dynamodb_staging_schema(), identifier=table) is none -%}
    {{ return(false) }}
  {%- endif -%}
  {{ return(dynamodb_change_log_is_one_full_export(table)) }}
{%- endmacro %}

{#- True when the change log of `table` holds exactly one batch, a full export, and no carried
    ledger (what the first build of dynamodb_one_full_export copies). -#}
{% macro dynamodb_change_log_is_one_full_export(table) -%}
  {%- set query -%}
    select count(*), max(summary[{{ _dynamodb_summary_key('kind') }}]), min(summary[{{ _dynamodb_summary_key('kind') }}]),
      count(summary[{{ _dynamodb_summary_key('ledger') }}])
    from {{ dynamodb_staging_relation(table) }}.snapshots
    where coalesce(summary[{{ _dynamodb_summary_key('batch_id') }}], '') != ''
       or summary[{{ _dynamodb_summary_key('ledger') }}] is not null
  {%- endset -%}
  {%- set row = run_query(query).rows[0] -%}
  {{ return(row[0] == 1 and row[1] == 'FULL_EXPORT' and row[2] == 'FULL_EXPORT' and row[3] == 0) }}
{%- endmacro %}
