-- `orders` a day ago next to now: Iceberg time travel (the snapshots maintenance keeps, by
-- default 24 hours and more, are readable this way).
select
    now_rows.status,
    now_rows.orders as orders_now,
    coalesce(day_ago.orders, 0) as orders_a_day_ago
from (
    select status, count(*) as orders
    from lakehouse.orders
    group by status
) as now_rows
left join (
    select status, count(*) as orders
    from lakehouse.orders for timestamp as of (current_timestamp - interval '1' day)
    group by status
) as day_ago
    on now_rows.status = day_ago.status
order by now_rows.status
