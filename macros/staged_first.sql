{#-
  A model of a table with nothing staged yet stops at compile time with one line saying to ingest
  first, not with Spark's TABLE_OR_VIEW_NOT_FOUND from deep in the merge: its change log, which the
  final table's columns come from, does not exist before the first ingest. The lookup is dbt's
  cached listing of the staging namespace (one query a run for every model).
-#}
{% macro dynamodb_staged_first(table) -%}
  {%- if dynamodb_building() -%}
    {%- set staging = dynamodb_staging_name(table) -%}
    {%- if adapter.get_relation(database=none, schema=dynamodb_staging_schema(), identifier=staging) is none -%}
      {{ exceptions.raise_compiler_error("table " ~ staging ~ ": nothing is staged yet, so there is nothing to merge into "
         ~ table ~ ". Ingest first: ddb-lakehouse sync --table " ~ staging ~ " EXPORT_FOLDER (ingests and merges),"
         ~ " or spark-submit ingestion/main.py ingest --table " ~ staging ~ " EXPORT_FOLDER, then dbt run") }}
    {%- endif -%}
  {%- endif -%}
{%- endmacro %}

{#- Whether dbt builds the models now (`dbt run`, `dbt build`): the questions a model asks the
    lakehouse at compile time (is anything staged, which batches are new, has their drift been
    adopted) are asked only then; `dbt compile` and the SQL linter compile it before any ingest. -#}
{% macro dynamodb_building() -%}
  {{ return(execute and flags.WHICH in ('run', 'build')) }}
{%- endmacro %}
