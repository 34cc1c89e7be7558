{{ config(unique_key=dynamodb_key_columns('orders'), partition_by=dynamodb_partition_by('orders')) }}

with

changes as (

    {{ dynamodb_changes_to_merge('orders', ref('stg_dynamodb__orders')) }}

),

latest_changes as (

    {{ dynamodb_latest_change_per_key('changes', dynamodb_key_columns('orders')) }}

),

final as (

    select * from latest_changes
    {% if not is_incremental() %}
    where {{ dynamodb_leaves_a_row('orders', ref('stg_dynamodb__orders')) }}
    {% endif %}

)

select * from final
