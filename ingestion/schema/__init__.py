"""A table's column types: the type model, the schema file, the type rules, detection from the
items, an item's image decoded into typed columns, and a typed row encoded back as canonical
DynamoDB JSON to compare with an export's (``verify``)."""
