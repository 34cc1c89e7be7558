-- `lakehouse` is the final database's default name: with FinalDatabaseName set, use yours.
-- `books` as it was at an instant, from its history (`history: true` in its entry,
-- docs/history.md): each item's version valid then. Every version is a row of the history, so
-- this reaches back past the final table's snapshots, which `maintain` expires.
-- `ddb-lakehouse query --as-of 2026-02-01T00:00:00Z "select ... from lakehouse.books"` reads it
-- the same way.
select id, title, _valid_from, _valid_to
from lakehouse.books__history
where _valid_from <= timestamp '2026-02-01 00:00:00'
    and (_valid_to is null or _valid_to > timestamp '2026-02-01 00:00:00')
    and _operation not in ('delete', 'ttl_delete')
order by id
