{#- The key columns of a configured DynamoDB table (vars.dynamodb_tables in dbt_project.yml). -#}
{% macro dynamodb_key_columns(table) -%}
  {%- set entry = dynamodb_entry(table) -%}
  {#- Parsing: a model of a table no longer configured (an entity taken out of its rule) stays
      parseable; it fails here only when it runs. -#}
  {%- if entry is none and not execute -%}{{ return([]) }}{%- endif -%}
  {%- if entry is none -%}
    {{ exceptions.raise_compiler_error("table " ~ table ~ " is not in vars.dynamodb_tables of dbt_project.yml") }}
  {%- endif -%}
  {%- set keys = [] -%}
  {%- for role in ['partition_key', 'sort_key'] if entry.get(role) -%}
    {%- do keys.append(dynamodb_column_name(entry[role].rsplit(':', 1)[0])) -%}
  {%- endfor -%}
  {{ return(keys) }}
{%- endmacro %}
