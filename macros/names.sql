{#-
  Physical names, from the vars of dbt_project.yml (which mirror ingestion/config/names.py;
  tests/config/test_names.py checks them). Models reach a change log through source('dynamodb',
  table); macros that run inside a materialization use these.
-#}

{#- The staging namespace: LAKEHOUSE_STAGING_DATABASE, or the var's default (config/names.py). -#}
{% macro dynamodb_staging_schema() -%}
{{ env_var('LAKEHOUSE_STAGING_DATABASE', var('lakehouse_staging_schema')) }}
{%- endmacro %}

{#- The change log of a DynamoDB table: lake.staging.<table> (an entity's: its entry's). -#}
{% macro dynamodb_staging_relation(table) -%}
{{ var('lakehouse_catalog') }}.{{ dynamodb_staging_schema() }}.{{ dynamodb_quote(dynamodb_staging_name(table)) }}
{%- endmacro %}

{#- The merge log: which staged batches each final table holds. -#}
{% macro dynamodb_merge_log() -%}
{{ var('lakehouse_catalog') }}.{{ dynamodb_staging_schema() }}.{{ var('lakehouse_merge_log') }}
{%- endmacro %}

{#- The final table whose history `name` is (`<table>__history`, config/names.py history_table),
    or `name` itself. -#}
{% macro dynamodb_table_of(name) -%}
  {%- set suffix = '__history' -%}
  {{ return(name[:(name | length) - (suffix | length)] if name.endswith(suffix) else name) }}
{%- endmacro %}
