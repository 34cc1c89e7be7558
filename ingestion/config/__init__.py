"""The bottom room: where things are, what they are called, what time it is, and the one
family of errors a user can cause.

- ``settings``: the project, the lakehouse home, the environment every child process shares;
- ``names``: the catalog, its namespaces and the tables the project owns, written once;
- ``clock``: every time compared is an aware UTC time (epoch microseconds included);
- ``errors``: ``LakehouseError``: the base of every error a user can cause, with its exit status.

May import: the standard library only.
"""
