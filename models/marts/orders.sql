{{ config(unique_key=dynamodb_key_columns('orders')) }}

with

changes as (

    select * from {{ ref('stg_dynamodb__orders') }}
    {% if is_incremental() %}
    where `_ingested_at` > (
        select coalesce(max(`_ingested_at`), timestamp '1970-01-01') from {{ this }}
    )
    {% endif %}

),

latest_changes as (

    {{ dynamodb_latest_change_per_key('changes', dynamodb_key_columns('orders')) }}

),

final as (

    select * from latest_changes
    {% if not is_incremental() %}
    where `_operation` != 'delete'
    {% endif %}

)

select * from final
