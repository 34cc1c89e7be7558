-- `lakehouse` is the final database's default name: with FinalDatabaseName set, use yours.
-- Orders per day of their last change (`_version` is the DynamoDB write time in microseconds).
select
    date(from_unixtime(_version / 1000000)) as day,
    count(*) as orders,
    sum(quantity) as items
from lakehouse.orders
group by date(from_unixtime(_version / 1000000))
order by day
