{#-
  Physical names, from the vars of dbt_project.yml (which mirror ingestion/config/names.py;
  tests/config/test_names.py checks them). Models reach a change log through source('dynamodb',
  table); macros that run inside a materialization use these.
-#}

{#- The change log of a DynamoDB table: lake.staging.<table>. -#}
{% macro dynamodb_staging_relation(table) -%}
{{ var('lakehouse_catalog') }}.{{ var('lakehouse_staging_schema') }}.{{ lakehouse_quote(table) }}
{%- endmacro %}

{#- The merge log: which staged batches each final table holds. -#}
{% macro dynamodb_merge_log() -%}
{{ var('lakehouse_catalog') }}.{{ var('lakehouse_staging_schema') }}.{{ var('lakehouse_merge_log') }}
{%- endmacro %}

{#- Iceberg's bucket transform as a function of the catalog, e.g. lake.system.bucket(16, ...). -#}
{% macro dynamodb_bucket_function(buckets) -%}
{{ var('lakehouse_catalog') }}.system.bucket({{ buckets | int }}, 
{%- endmacro %}
