"""A Spark job that ran out of the driver's memory, or whose plan grew past what the JVM can
analyse, as one line a person can act on (``OutOfMemory``): the table, the step, the attribute
whose type is the largest (the likely cause on a table of deep items) and what to do, never a
Python traceback with Java stacks below it.

Every expression the project builds over a nested value is linear in the size of its type
(docs/performance.md, "Deep items"), so this is what remains: items larger than the driver's
heap allows, or a schema wider than the defaults were sized for. Nothing is half-applied by such
a failure: every write is one Iceberg commit, made after the work that could fail.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from ingestion.config.errors import LakehouseError
from ingestion.schema.types import ColumnType, Schema

log = logging.getLogger(__name__)

_CAUSES = (
    ("java.lang.OutOfMemoryError", "ran out of the driver's memory"),
    ("SparkOutOfMemoryError", "ran out of the driver's memory"),
    ("GC overhead limit exceeded", "ran out of the driver's memory"),
    ("java.lang.StackOverflowError", "built a plan deeper than the JVM's stack"),
    (
        "INVALID_DRIVER_MEMORY",
        "could not start Spark: its driver memory is below Spark's minimum of 450 MB",
    ),
)
# The Python side's view of a JVM that died under it (the usual end of an out-of-memory error);
# the last one is what a running job answers when Spark's handler of an uncaught error (out of
# memory in a task's thread) stops the context and its shutdown takes long enough to answer.
_GONE = (
    "Py4JNetworkError",
    "ConnectionRefusedError",
    "Answer from Java side is empty",
    "cancelled because SparkContext was shut down",
)


class OutOfMemory(LakehouseError):
    """A Spark job ran out of the driver's memory (or of stack) on a table's data."""


def cause(exc: BaseException) -> str | None:
    """What ``exc`` says ran out, or None for any other failure."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = f"{type(current).__name__}: {current}"
        for marker, said in _CAUSES:
            if marker in text:
                return said
        if any(marker in text for marker in _GONE) or (
            type(current).__name__ == "Py4JError" and not _jvm_answers()
        ):
            return "stopped its JVM (most often: out of the driver's memory)"
        current = current.__cause__ or current.__context__
    return None


def _jvm_answers() -> bool:
    """Whether this process's Spark JVM still answers (a call that failed with a bare
    ``Py4JError`` lost it mid-call)."""
    try:
        from pyspark import SparkContext

        context = SparkContext._active_spark_context
        if context is None or context._jvm is None:
            return False
        context._jvm.java.lang.System.currentTimeMillis()
        return True
    except Exception:
        return False


def end_jvm() -> None:
    """Stop this process's Spark JVM, where Python started it, before the one line is said: a
    JVM dying of an out-of-memory error goes on writing its shutdown's warnings to the same
    standard error for a while, after the line otherwise (seen in the suite: the line, then
    `ShutdownHook '' failed ... OutOfMemoryError`). Under spark-submit the JVM runs Python and
    is left alone (no process of this one's)."""
    pyspark = sys.modules.get("pyspark")
    context = getattr(pyspark, "SparkContext", None)
    process = getattr(getattr(context, "_gateway", None), "proc", None)
    if process is None or process.poll() is not None:
        return
    process.kill()
    try:
        process.wait(timeout=30)
    except Exception:  # noqa: BLE001 (the line is said whatever the JVM does)
        log.debug("the JVM did not stop in 30 s", exc_info=True)


def _paths(name: str, column: ColumnType) -> Iterator[tuple[str, int]]:
    """Each leaf path below ``name`` with its depth."""
    if column.kind == "struct" and column.fields:
        for f in column.fields:
            for path, depth in _paths(f"{name}.{f.name}", f.type):
                yield path, depth + 1
    elif column.kind == "array" and column.element is not None:
        for path, depth in _paths(f"{name}[]", column.element):
            yield path, depth + 1
    else:
        yield name, 0


def type_size(column: ColumnType) -> int:
    """The number of types in ``column``'s tree (itself, its fields' and its elements')."""
    below = [f.type for f in column.fields] + ([column.element] if column.element else [])
    return 1 + sum(type_size(b) for b in below)


def largest_attribute(schema: Schema | None) -> str | None:
    """``attribute (N types, deepest path P)`` of the attribute with the largest type."""
    attributes = [a for a in (schema.attributes if schema else ()) if not a.key]
    attributes += [
        a for e in (schema.entities if schema else ()) for a in e.attributes if not a.key
    ]
    if not attributes:
        return None
    largest = max(attributes, key=lambda a: type_size(a.type))
    if largest.type.kind not in ("struct", "array"):
        return None
    deepest, _ = max(_paths(largest.name, largest.type), key=lambda p: p[1])
    return f"{largest.name!r} ({type_size(largest.type)} nested types, deepest path {deepest})"


def driver_memory() -> str:
    """The driver's memory as this JVM was started with it (``spark-submit --driver-memory``,
    spark-defaults.conf or the CLI's ``LAKEHOUSE_DRIVER_MEMORY``), or the CLI's setting when the
    JVM no longer answers."""
    try:
        from pyspark import SparkContext

        context = SparkContext._active_spark_context
        if context is not None and _jvm_answers():
            found = context.getConf().get("spark.driver.memory")
            if found:
                return str(found)
    except Exception:  # noqa: BLE001 (a figure in an error message: never a second failure)
        pass
    return os.environ.get("LAKEHOUSE_DRIVER_MEMORY", "2g")


def message(table: str | None, step: str, said: str, schema: Schema | None = None) -> str:
    memory = driver_memory()
    subject = f"{table}: {step}" if table else step
    largest = largest_attribute(schema)
    likely = f"; its largest attribute is {largest}" if largest else ""
    declare = (
        f'or declare that attribute {{"type": "string"}} in schemas/{table}.json (kept as JSON '
        "text) and run rebuild"
        if largest and table
        else "or run it for fewer tables or smaller exports at a time"
    )
    return (
        f"{subject} {said} (driver memory {memory}){likely}. Nothing was half-applied: "
        "whatever this step would have committed is not. Run it again with more memory "
        f"(LAKEHOUSE_DRIVER_MEMORY=4g ddb-lakehouse ..., or spark-submit --driver-memory 4g), "
        f"{declare}"
    )


@contextmanager
def explained(table: str | None, step: str, schema: Schema | None = None) -> Iterator[None]:
    """Raise ``OutOfMemory`` in place of a failure that ran out of memory or stack in ``step``
    of ``table`` (``schema``: its types, to name the likely attribute)."""
    try:
        yield
    except LakehouseError:
        raise
    except Exception as exc:
        said = cause(exc)
        if said is None:
            raise
        raise OutOfMemory(message(table, step, said, schema)) from None
