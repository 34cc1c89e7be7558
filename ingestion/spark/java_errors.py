"""What a call into Spark's JVM failed with, told from the Java exception itself (its class and
its superclasses, its causes, Spark's error class), never from the text of its message.

A failure arrives in Python as py4j's ``Py4JJavaError`` (``java_exception``) or, where PySpark
converted it, as a ``CapturedException`` (its origin); either way the Java throwable and its
causes are here. Decision: the checks walk the cause chain, because a task's failure reaches the
driver wrapped twice (the job's abort, the task's write) and an Iceberg commit's inside Py4J's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# Spark's error classes for a table or namespace that does not exist, and its exception classes
# for them as Iceberg's Spark catalog throws them.
MISSING_ERROR_CLASSES = frozenset({"TABLE_OR_VIEW_NOT_FOUND", "SCHEMA_NOT_FOUND"})
MISSING_CLASSES = (
    "org.apache.spark.sql.catalyst.analysis.NoSuchTableException",
    "org.apache.spark.sql.catalyst.analysis.NoSuchNamespaceException",
    "org.apache.iceberg.exceptions.NoSuchTableException",
)
NO_SUCH_TABLE = "org.apache.iceberg.exceptions.NoSuchTableException"
COMMIT_FAILED = "org.apache.iceberg.exceptions.CommitFailedException"
ILLEGAL_STATE = "java.lang.IllegalStateException"
ALREADY_EXISTS_ERROR_CLASSES = frozenset({"TABLE_OR_VIEW_ALREADY_EXISTS"})
ALREADY_EXISTS_CLASSES = (
    "org.apache.spark.sql.catalyst.analysis.TableAlreadyExistsException",
    "org.apache.iceberg.exceptions.AlreadyExistsException",
)
# ``raise_error(message)``: Spark 3.5 throws a plain RuntimeException with the message; Spark 4
# its error class with the message as a parameter.
RAISED = "java.lang.RuntimeException"
RAISED_ERROR_CLASS = "USER_RAISED_EXCEPTION"
_DEEPEST = 64  # causes followed at most (a cycle guard)


def _origin(exc: BaseException) -> Any | None:
    """The Java exception behind ``exc``, or behind the exception it was raised from (a step
    that words a Spark failure for a person raises its own error ``from`` it)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        java = getattr(current, "java_exception", None)  # py4j's Py4JJavaError
        if java is None:
            java = getattr(current, "_origin", None)  # PySpark's conversion
        if java is not None:
            return java
        current = current.__cause__ or current.__context__
    return None


@dataclass(frozen=True)
class Throwable:
    """One Java exception of a failure's causes, as read from the JVM."""

    classes: tuple[str, ...]  # its class, then its superclasses
    error_class: str | None  # Spark's, for a SparkThrowable
    message: str | None  # what ``raise_error`` raised, for the exceptions that carry it


def chain(exc: BaseException) -> list[Throwable]:
    """The Java exception behind ``exc`` and its causes, outermost first: none for an exception
    that did not come from the JVM, and those read before the JVM stopped answering (a JVM that
    died leaves its exceptions unreadable: the caller's other checks decide)."""
    found: list[Throwable] = []
    throwable = _origin(exc)
    try:
        while throwable is not None and len(found) < _DEEPEST:
            found.append(_read(throwable))
            throwable = throwable.getCause()
    except Exception:  # noqa: BLE001 (py4j: the JVM is gone)
        log.debug("the JVM did not answer for a cause of %r", exc, exc_info=True)
    return found


def _read(throwable: Any) -> Throwable:
    classes = []
    java_class = throwable.getClass()
    while java_class is not None:
        classes.append(str(java_class.getName()))
        java_class = java_class.getSuperclass()
    try:
        found = throwable.getErrorClass()  # a SparkThrowable's
    except Exception:  # noqa: BLE001 (py4j: no such method on this exception)
        found = None
    error_class = str(found) if found is not None else None
    message = None
    if error_class == RAISED_ERROR_CLASS:
        message = str(dict(throwable.getMessageParameters()).get("errorMessage", ""))
    elif classes[0] == RAISED:
        said = throwable.getMessage()
        message = str(said) if said is not None else ""
    return Throwable(tuple(classes), error_class, message)


def caused_by(exc: BaseException, *classes: str) -> bool:
    """Whether a Java exception of one of ``classes`` (or of a subclass) is behind ``exc``."""
    return any(name in classes for t in chain(exc) for name in t.classes)


def error_classes(exc: BaseException) -> set[str]:
    """Spark's error classes along ``exc``'s causes."""
    return {t.error_class for t in chain(exc) if t.error_class is not None}


def _any(exc: BaseException, kinds: frozenset[str], classes: tuple[str, ...]) -> bool:
    """A throwable of ``classes``, or of Spark's error classes ``kinds``, behind ``exc``."""
    return any(t.error_class in kinds or set(t.classes) & set(classes) for t in chain(exc))


def missing(exc: BaseException) -> bool:
    """``exc`` says a table or namespace does not exist."""
    return _any(exc, MISSING_ERROR_CLASSES, MISSING_CLASSES)


def already_exists(exc: BaseException) -> bool:
    """``exc`` says the table to create exists already."""
    return _any(exc, ALREADY_EXISTS_ERROR_CLASSES, ALREADY_EXISTS_CLASSES)


def raised(exc: BaseException) -> str | None:
    """The message a ``raise_error`` in the failed query raised, or None when none did."""
    return next((t.message for t in chain(exc) if t.message is not None), None)
