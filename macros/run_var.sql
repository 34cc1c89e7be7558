{#-
  A value `ddb-lakehouse merge` passes to one dbt command: `--vars` when given (a person's
  `dbt run --vars ...`), else the JSON object in DYNAMODB_LAKEHOUSE_RUN, which the merge sets for
  the command's duration. Why not `--vars`: new vars make dbt parse the whole project again, twice
  a merge (docs/performance.md, "dbt's fixed cost per merge"); a variable of the environment read
  only while executing (never while parsing) keeps partial parsing valid.
-#}
{% macro dynamodb_run_var(name) -%}
  {%- set given = var(name, none) -%}
  {%- if given is not none or not execute -%}{{ return(given) }}{%- endif -%}
  {{ return(fromjson(env_var('DYNAMODB_LAKEHOUSE_RUN', '{}')).get(name)) }}
{%- endmacro %}
