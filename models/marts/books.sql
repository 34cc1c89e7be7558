{{ config(unique_key=dynamodb_key_columns('books'), partition_by=dynamodb_partition_by('books')) }}

with

changes as (

    {{ dynamodb_changes_to_merge('books', ref('stg_dynamodb__books')) }}

),

latest_changes as (

    {{ dynamodb_latest_change_per_key('changes', dynamodb_key_columns('books')) }}

),

final as (

    select * from latest_changes
    {% if not is_incremental() %}
    where {{ dynamodb_leaves_a_row('books', ref('stg_dynamodb__books')) }}
    {% endif %}

)

select * from final
