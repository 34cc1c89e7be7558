-- `lakehouse` is the final database's default name: with FinalDatabaseName set, use yours.
-- The current state of `books`: one row per item, deletes applied. With `ttl_deletes: keep`,
-- items DynamoDB's TTL expired stay, flagged `_operation = 'ttl_delete'`: filter them here.
select
    id,
    title,
    author,
    price,
    in_stock,
    from_unixtime(_version / 1000000) as changed_at
from lakehouse.books
where _operation <> 'ttl_delete'
order by price desc, id
limit 20
