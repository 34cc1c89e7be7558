"""Compile a Jinja expression with the project's macros through dbt (in-process, the real dbt):
how the tests tie a Python rule to the macro that mirrors it."""

from __future__ import annotations

import json
from typing import Any


def compile_inline(expression: str, variables: dict[str, Any] | None = None) -> str:
    from dbt.cli.main import dbtRunner

    from ingestion.config import settings

    project = settings.project_dir()
    args = ["compile", "--quiet", "--inline", expression, "--project-dir", str(project)]
    args += ["--profiles-dir", str(project)]
    if variables:
        args += ["--vars", json.dumps(variables)]
    result = dbtRunner().invoke(args)
    assert result.success, result.exception
    return str(result.result.results[0].node.compiled_code).strip()
