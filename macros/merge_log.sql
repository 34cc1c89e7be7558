{#-
  The merge log from a plain `dbt run` (or `dbt build`): each DynamoDB model's post-hook
  (dbt_project.yml, `marts`) records the batches the model just merged, as
  `ddb-lakehouse merge` records its own after `dbt run` and `dbt test`. Without it a plain
  `dbt run` left every batch "new": `status` called merged batches unmerged, and every later run
  merged the whole change log again.

  What it records is the list the model pinned when it read its changes (macros/new_batches.sql),
  never a list worked out again afterwards, so a batch an ingest commits during the run waits for
  the next one. A failure between the model's commit and this record leaves the batches
  unrecorded: the next run applies them again, which changes nothing (the latest change per key
  wins, the history skips a version it holds). A final table and its history keep rows of their
  own (`<table>` and `<table>__history`): one of them failing never makes the other skip a batch.
  Under `ddb-lakehouse merge` (its batches handed over) the hook records nothing.
-#}
{% macro dynamodb_record_merged() -%}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {%- set name = this.identifier -%}
  {%- set table = dynamodb_table_of(name) -%}
  {%- if dynamodb_entry(table) is none or this.schema == dynamodb_staging_schema() -%}{{ return('') }}{%- endif -%}
  {%- if table in (dynamodb_run_var('dynamodb_batches') or {}) -%}{{ return('') }}{%- endif -%}
  {%- set batches = dynamodb_pinned_batches(name) -%}
  {%- if batches is none -%}{{ return('') }}{%- endif -%}
  {%- do dynamodb_unpin_batches(name) -%}
  {%- if batches | length == 0 -%}{{ return('') }}{%- endif -%}
  {%- do run_query(dynamodb_create_merge_log()) -%}
insert into {{ dynamodb_merge_log() }}
select {{ dynamodb_quoted_list([name]) }}, batch_id, current_timestamp()
from (select explode(array({{ dynamodb_quoted_list(batches) }})) as batch_id)
{%- endmacro %}

{#- The merge log's definition, as ingestion/catalog/merge_log.py creates it (tests/merge/
    test_plain_dbt.py checks the two tables agree). -#}
{% macro dynamodb_create_merge_log() -%}
create table if not exists {{ dynamodb_merge_log() }}
(table_name string, batch_id string, merged_at timestamp) using iceberg
tblproperties ('format-version'='2', 'commit.retry.num-retries'='10')
{%- endmacro %}
