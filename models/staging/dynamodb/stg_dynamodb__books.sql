with

source as (

    select * from {{ source('dynamodb', 'books') }}

),

final as (

    select * from source

)

select * from final
