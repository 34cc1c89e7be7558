{#-
  The final table's partitioning: `buckets: N` in the table's configuration partitions it by
  bucket(N, partition key column), so a merge reads and writes only the buckets its changes hit
  (see merge_with_delete). None (unpartitioned) otherwise. Changing it later needs a full refresh
  (`dbt run --full-refresh -s TABLE` or `ddb-lakehouse rebuild`): dbt never re-partitions an
  existing incremental table.
-#}
{% macro dynamodb_buckets(table) -%}
  {{ return((dynamodb_entry(table) or {}).get('buckets')) }}
{%- endmacro %}

{% macro dynamodb_partition_by(table) -%}
  {%- set buckets = dynamodb_buckets(table) -%}
  {%- if not buckets -%}{{ return(none) }}{%- endif -%}
  {{ return(['bucket(' ~ (buckets | int) ~ ', ' ~ dynamodb_quote(dynamodb_key_columns(table)[0]) ~ ')']) }}
{%- endmacro %}

{#- Iceberg's bucket transform of `column` through the catalog, e.g. lake.system.bucket(16, `id`). -#}
{% macro dynamodb_bucket_function(buckets, column) -%}
{{ var('lakehouse_catalog') }}.system.bucket({{ buckets | int }}, {{ column }})
{%- endmacro %}
