"""Requests checked against AWS's own service models, offline.

Every request the project sends or writes for AWS (``emr submit``'s ``StartJobRun``, the
export requests, the template's EventBridge Scheduler targets) can be checked here against the
operation's input shape in botocore's service model: required members, types and minimum
lengths by botocore's own ``ParamValidator``; maximum lengths, patterns of tokens and enum
values by ``_limits`` (the validator leaves those to the service). No AWS call is made.

A Scheduler target names an SDK call as
``arn:<partition>:scheduler:::aws-sdk:<service>:<apiAction>`` and writes its input's members with a
capital first letter (``ApplicationId``) where botocore's shapes have ``applicationId``:
``scheduler_request`` maps the names case-insensitively and refuses any member the shape lacks.
Botocore fills an idempotency token (``clientToken``) for SDK callers only; a Scheduler input must
carry its own (``<aws.scheduler.execution-id>``).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from ingestion.config.errors import LakehouseError

# A Scheduler universal target, in any partition (aws, aws-cn, aws-us-gov).
SCHEDULER_SDK = re.compile(r"arn:aws[a-z-]*:scheduler:::aws-sdk:")


class ContractError(LakehouseError):
    """A request that AWS would refuse before doing anything."""


@cache
def _session() -> Any:
    import botocore.session

    return botocore.session.get_session()


def operation_model(service: str, operation: str) -> Any:
    """botocore's model of ``service``'s ``operation`` (e.g. ``emr-serverless``,
    ``StartJobRun``)."""
    model = _session().get_service_model(service)
    if operation not in model.operation_names:
        raise ContractError(f"{service} has no operation {operation}")
    return model.operation_model(operation)


def problems(service: str, operation: str, params: dict[str, Any]) -> list[str]:
    """What is wrong with ``params`` as ``service``'s ``operation`` input; empty when nothing."""
    from botocore.validate import ParamValidator

    shape = operation_model(service, operation).input_shape
    report = ParamValidator().validate(params, shape)
    found = [line for line in report.generate_report().splitlines() if line.strip()]
    found += _limits(params, shape, "")
    return [line.strip() for line in found]


def check(service: str, operation: str, params: dict[str, Any]) -> None:
    """Raise ``ContractError`` naming every problem of ``params`` (``problems``)."""
    found = problems(service, operation, params)
    if found:
        raise ContractError(f"{service} {operation}: " + "; ".join(found))


def _limits(value: Any, shape: Any, where: str) -> list[str]:
    """Maximum lengths and enum values, which ``ParamValidator`` does not check."""
    found: list[str] = []
    kind = shape.type_name
    if kind == "structure" and isinstance(value, dict):
        for name, member in value.items():
            if name in shape.members:
                found += _limits(member, shape.members[name], f"{where}.{name}".lstrip("."))
    elif kind == "list" and isinstance(value, list):
        found += _too_long(len(value), shape, where)
        for i, item in enumerate(value):
            found += _limits(item, shape.member, f"{where}[{i}]")
    elif kind == "map" and isinstance(value, dict):
        for key, item in value.items():
            found += _limits(item, shape.value, f"{where}.{key}")
    elif kind == "string" and isinstance(value, str):
        found += _too_long(len(value), shape, where)
        if shape.enum and value not in shape.enum:
            found.append(f"{where}: {value!r} is not one of {', '.join(shape.enum)}")
    return found


def _too_long(length: int, shape: Any, where: str) -> list[str]:
    most = shape.metadata.get("max")
    if most is not None and length > most:
        return [f"{where}: length {length} is over the maximum {most}"]
    return []


def _service_of(sdk_name: str) -> str:
    """botocore's service name for the Scheduler's SDK service name (``emrserverless``)."""
    wanted = sdk_name.lower()
    for name in _session().get_available_services():
        if name.replace("-", "").lower() == wanted:
            return str(name)
    raise ContractError(f"no AWS service is named {sdk_name!r}")


def _recase(value: Any, shape: Any, where: str) -> Any:
    """``value`` with its structure members named as ``shape`` names them; a member the shape
    lacks raises ``ContractError``."""
    kind = shape.type_name
    if kind == "structure" and isinstance(value, dict):
        by_lower = {name.lower(): name for name in shape.members}
        out = {}
        for name, member in value.items():
            real = by_lower.get(name.lower())
            if real is None:
                raise ContractError(
                    f"{where or 'input'}: no member {name!r} (known: {', '.join(shape.members)})"
                )
            out[real] = _recase(member, shape.members[real], f"{where}.{real}".lstrip("."))
        return out
    if kind == "list" and isinstance(value, list):
        return [_recase(item, shape.member, where) for item in value]
    if kind == "map" and isinstance(value, dict):
        return {key: _recase(item, shape.value, where) for key, item in value.items()}
    return value


def scheduler_request(target_arn: str, target_input: dict[str, Any]) -> tuple[str, str, dict]:
    """(service, operation, params) of an EventBridge Scheduler universal target, with the
    input's member names as botocore's shape has them."""
    universal = SCHEDULER_SDK.match(target_arn)
    if not universal:
        raise ContractError(
            f"{target_arn}: not a Scheduler universal target (arn:aws:scheduler:::aws-sdk:...)"
        )
    sdk_service, _, action = target_arn[universal.end() :].partition(":")
    service = _service_of(sdk_service)
    operation = action[:1].upper() + action[1:]
    shape = operation_model(service, operation).input_shape
    return service, operation, _recase(target_input, shape, "")


def check_scheduler_target(target_arn: str, target_input: dict[str, Any]) -> None:
    """Raise ``ContractError`` when the Scheduler would call AWS with an input it refuses."""
    service, operation, params = scheduler_request(target_arn, target_input)
    check(service, operation, params)
