"""The command line (``ddb-lakehouse``, ``python -m ingestion.cli``, ``spark-submit
ingestion/main.py``): the root parser in ``main``, one module per group of commands, each holding
its commands' parsers next to their handlers, and ``output`` for everything printed.

A command's module wires parts of the rooms below; it holds no business logic.
May import: every other room (``aws``, ``samples``, ``lake``, ``dynamodb``, ``sources``,
``config``). Nothing imports it.
"""

from __future__ import annotations

from ingestion.cli.main import main

__all__ = ["main"]
