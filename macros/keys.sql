{#- Identifier quoting for Spark SQL: backticks, embedded backticks doubled. -#}
{% macro lakehouse_quote(identifier) -%}
  `{{ identifier | replace('`', '``') }}`
{%- endmacro %}

{#-
  Column name of a DynamoDB attribute; mirrors ingestion/naming.py (a test checks they agree):
  lowercase, runs outside [a-z0-9_] -> '_', leading digit -> leading '_'.
-#}
{% macro dynamodb_column_name(attribute) -%}
  {%- set name = modules.re.sub('[^a-z0-9_]+', '_', attribute | lower) -%}
  {%- if name == '' or name[0] in '0123456789' -%}{%- set name = '_' ~ name -%}{%- endif -%}
  {{ return(name) }}
{%- endmacro %}

{#- The key columns of a configured DynamoDB table (vars.dynamodb_tables in dbt_project.yml). -#}
{% macro dynamodb_key_columns(table) -%}
  {%- set tables = var('dynamodb_tables', {}) -%}
  {%- if table not in tables -%}
    {{ exceptions.raise_compiler_error("table " ~ table ~ " is not in vars.dynamodb_tables of dbt_project.yml") }}
  {%- endif -%}
  {%- set entry = tables[table] -%}
  {%- set keys = [] -%}
  {%- for role in ['partition_key', 'sort_key'] if entry.get(role) -%}
    {%- do keys.append(dynamodb_column_name(entry[role].rsplit(':', 1)[0])) -%}
  {%- endfor -%}
  {{ return(keys) }}
{%- endmacro %}
