"""The one family of errors a user can cause and act on (a wrong argument, a bad export, a busy
table, a failed data test...). Each is named for what went wrong and derives from
``LakehouseError``; the CLI catches that base alone, prints the message on one line and exits
with the error's ``exit_status``. Anything else is a bug in the project and keeps its traceback.

A new user-facing error derives from ``LakehouseError`` (or one of its subclasses) and needs no
other registration.
"""

from __future__ import annotations


class LakehouseError(Exception):
    """An error the person running the command can act on: the message says what to do."""

    exit_status = 2
