"""An AWS refusal (access denied, throttled, point-in-time recovery off...) as one line of the
project's error family, naming the call: what a user fixes, without botocore's traceback."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ingestion.sources.manifest import ExportError


@contextlib.contextmanager
def aws_errors(what: str) -> Iterator[None]:
    """An AWS refusal (denied, throttled, recovery off...) as one line of the error family."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise ExportError(f"{what}: {error.get('Code')}: {error.get('Message')}") from None
    except BotoCoreError as exc:
        raise ExportError(f"{what}: {exc}") from None
