-- Maps become structs and lists of maps arrays of structs: `editions` unnested, one row per
-- edition, with a field of the `details` struct.
select
    b.id,
    b.details.publisher as publisher,
    e.format,
    e.price
from lakehouse.books as b
cross join unnest(b.editions) as t (e)
order by b.id, e.format
