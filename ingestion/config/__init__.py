"""The bottom room: where things are (``settings``: the project, the lakehouse home, the
environment every child process shares) and what they are called (``names``: the catalog, its
namespaces and the tables the project owns, written once), and what time it is (``clock``: every
time compared is an aware UTC time).

May import: the standard library only.
"""
