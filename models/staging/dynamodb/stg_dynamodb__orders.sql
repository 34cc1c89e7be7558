with

source as (

    select * from {{ source('dynamodb', 'orders') }}

),

final as (

    select * from source

)

select * from final
