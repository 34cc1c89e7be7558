"""The Lambda handler's stable path: ``ingestion.stream_writer.handler``.

Deployed functions (deploy/template.yaml) name this path; the writer itself lives in
``ingestion.sources.change_file_writer``. This shim is packed into the function's zip beside it.
"""

from __future__ import annotations

from ingestion.sources.change_file_writer import handler

__all__ = ["handler"]
