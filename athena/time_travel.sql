-- `lakehouse` is the final database's default name: with FinalDatabaseName set, use yours.
-- `orders` an hour ago next to now: Iceberg time travel. Ask only for a moment inside the
-- retention `maintain` keeps (default 24 hours): a snapshot it has expired cannot be read, and a
-- table younger than the interval has no snapshot then.
select
    now_rows.status,
    now_rows.orders as orders_now,
    coalesce(hour_ago.orders, 0) as orders_an_hour_ago
from (
    select status, count(*) as orders
    from lakehouse.orders
    group by status
) as now_rows
left join (
    select status, count(*) as orders
    from lakehouse.orders for timestamp as of (current_timestamp - interval '1' hour)
    group by status
) as hour_ago
    on now_rows.status = hour_ago.status
order by now_rows.status
