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

{#-
  The final table's partitioning: `buckets: N` in the table's configuration partitions it by
  bucket(N, partition key column), so a merge reads and writes only the buckets its changes hit
  (see merge_with_delete). None (unpartitioned) otherwise. Changing it later needs a full refresh
  (`dbt run --full-refresh -s TABLE` or `ddb-lakehouse rebuild`): dbt never re-partitions an
  existing incremental table.
-#}
{% macro dynamodb_buckets(table) -%}
  {{ return(var('dynamodb_tables', {}).get(table, {}).get('buckets')) }}
{%- endmacro %}

{% macro dynamodb_partition_by(table) -%}
  {%- set buckets = dynamodb_buckets(table) -%}
  {%- if not buckets -%}{{ return(none) }}{%- endif -%}
  {{ return(['bucket(' ~ (buckets | int) ~ ', ' ~ lakehouse_quote(dynamodb_key_columns(table)[0]) ~ ')']) }}
{%- endmacro %}
