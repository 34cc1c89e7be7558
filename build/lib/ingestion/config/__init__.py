"""The bottom room: where things are (``settings``: the project, the lakehouse home, the
environment every child process shares) and what they are called (``names``: the catalog, its
namespaces and the tables the project owns, written once).

May import: the standard library only.
"""
