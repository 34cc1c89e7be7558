"""The command line (``ddb-lakehouse``, ``python -m ingestion.cli``, ``spark-submit
ingestion/main.py``): ``app`` is the root parser, each ``*_commands`` module a group of commands.
A handler parses its arguments, calls one function of a room below (``jobs`` mostly) and
prints; it holds no logic of its own."""

from __future__ import annotations

from ingestion.cli.app import main

__all__ = ["main"]
