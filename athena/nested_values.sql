-- `lakehouse` is the final database's default name: with FinalDatabaseName set, use yours.
-- Maps become structs and lists of maps arrays of structs: `editions` unnested, one row per
-- edition, with a field of the `details` struct. In Athena (Trino), unnesting an array of rows
-- gives one column per field, so the alias names each field, in the struct's order.
select
    b.id,
    b.details.publisher as publisher,
    t.format,
    t.price
from lakehouse.books as b
cross join unnest(b.editions) as t (format, price)
order by b.id, t.format
