"""Tracing: spans exported over OTLP/HTTP to a real receiver, with the access decision and no text.

The receiver is an HTTP server this test runs on 127.0.0.1, decoding each POST /v1/traces
with opentelemetry-proto, so what is checked is what would reach a collector. Each traced
server is a process of its own (tests/mcp/traced_server.py) started over stdio: the global
tracer provider can be set once per process, and this process stays a caller without an
SDK that only passes its trace context on in the request's ``_meta``.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from governed_evidence import __version__, telemetry
from governed_evidence.search.limits import MAX_QUERY_CHARS
from tests.mcp.traced_server import TOY_ATTRIBUTES, TOY_LEFT_OUT, TOY_MAX_QUERY

REPO = Path(__file__).resolve().parents[2]
PREFIX = "governed_evidence."
#: How long a test waits for a span to arrive (the server exports every 50 ms).
ARRIVAL_SECONDS = 20.0


class Receiver:
    """An OTLP/HTTP trace receiver: keeps every request body as sent, and decoded."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
                    self.send_response(404)
                    self.end_headers()
                    return
                ExportTraceServiceRequest.FromString(body)  # a body that does not decode fails here
                with receiver._lock:
                    receiver.bodies.append(body)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def exported(self) -> bytes:
        with self._lock:
            return b"".join(self.bodies)

    def requests(self) -> list[ExportTraceServiceRequest]:
        with self._lock:
            return [ExportTraceServiceRequest.FromString(body) for body in self.bodies]

    def spans(self) -> list[tuple[dict[str, Any], Span]]:
        """Every span received, with its resource's attributes."""
        return [
            (attributes(resource_spans.resource.attributes), span)
            for request in self.requests()
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]

    async def wait_for(self, predicate: Callable[[Span], bool]) -> tuple[dict[str, Any], Span]:
        deadline = time.monotonic() + ARRIVAL_SECONDS
        while time.monotonic() < deadline:
            for resource, span in self.spans():
                if predicate(span):
                    return resource, span
            await asyncio.sleep(0.05)
        names = [span.name for _, span in self.spans()]
        raise AssertionError(f"no such span arrived within {ARRIVAL_SECONDS} s; received: {names}")


def attributes(pairs: Any) -> dict[str, Any]:
    """OTLP key-values as a plain dict (string, int, bool and double values)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        assert isinstance(pair, KeyValue)
        kind = pair.value.WhichOneof("value")
        out[pair.key] = getattr(pair.value, kind) if kind else None
    return out


def ours(span: Span) -> dict[str, Any]:
    return {k: v for k, v in attributes(span.attributes).items() if k.startswith(PREFIX)}


def tool_span(tool: str) -> Callable[[Span], bool]:
    return lambda span: span.kind == Span.SPAN_KIND_SERVER and span.name == f"tools/call {tool}"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver()
    yield running
    running.close()


def _child_env(**otel: str) -> dict[str, str]:
    """This environment without any OTEL_* or proxy variable, plus ``otel``; the repo importable."""
    proxies = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and k.lower() not in proxies}
    env.update(otel)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["NO_PROXY"] = "127.0.0.1,localhost"
    env.setdefault("GOVERNED_EVIDENCE_LOG_LEVEL", "WARNING")
    return env


def traced_server(*args: str, **otel: str) -> StdioTransport:
    # A short batch delay, so the span of each call is exported while the session is still
    # open (the test waits for it) rather than only when the server shuts down.
    env = _child_env(OTEL_BSP_SCHEDULE_DELAY="50", **otel)
    return StdioTransport(
        command=sys.executable, args=["-m", "tests.mcp.traced_server", *args], env=env, cwd=str(REPO), keep_alive=False
    )


class CallerTrace:
    """The caller's own trace: the context it sends in ``_meta.traceparent``."""

    def __init__(self) -> None:
        self.trace_id = secrets.token_hex(16)
        self.span_id = secrets.token_hex(8)
        self.meta = {"traceparent": f"00-{self.trace_id}-{self.span_id}-01"}

    def continued_by(self, span: Span) -> bool:
        return span.trace_id.hex() == self.trace_id and span.parent_span_id.hex() == self.span_id


# -- the mechanism: a tool that annotates its span --------------------------------------------


def test_a_tool_call_span_carries_the_decision_and_continues_the_callers_trace(receiver: Receiver) -> None:
    query = "which policy covers zq7731 hotel nights"
    caller = CallerTrace()

    async def body() -> tuple[dict[str, Any], Span]:
        async with Client(traced_server("toy", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.base_url)) as client:
            result = await client.call_tool("lookup", {"query": query}, meta=caller.meta)
            assert result.structured_content == {"results": 2}
            return await receiver.wait_for(tool_span("lookup"))

    resource, span = asyncio.run(body())
    assert ours(span) == TOY_ATTRIBUTES
    assert not set(TOY_LEFT_OUT) & set(attributes(span.attributes))
    assert caller.continued_by(span), (span.trace_id.hex(), span.parent_span_id.hex(), caller.meta)
    assert resource["service.name"] == "governed-evidence"
    assert resource["service.version"] == __version__
    exported = receiver.exported()
    assert query.encode() not in exported and b"zq7731" not in exported
    assert str(TOY_LEFT_OUT["governed_evidence.query"]).encode() not in exported


def test_an_argument_the_schema_refuses_leaves_no_text_in_the_span(receiver: Receiver) -> None:
    # pydantic's message quotes the refused value; fastmcp records it on the span as the
    # exception's message and the status description. The exporter sends only the type.
    marker = "zq7731-refused-argument"
    query = (marker + " ") * (TOY_MAX_QUERY // len(marker) + 2)

    async def body() -> tuple[dict[str, Any], Span]:
        async with Client(traced_server("toy", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.base_url)) as client:
            result = await client.call_tool("lookup", {"query": query}, raise_on_error=False)
            assert result.is_error
            return await receiver.wait_for(tool_span("lookup"))

    _, span = asyncio.run(body())
    assert span.status.code == Status.STATUS_CODE_ERROR and span.status.message == ""
    assert span.events, "the exception event is kept, as its type"
    for event in span.events:
        assert set(attributes(event.attributes)) <= {"exception.type", "exception.escaped"}
    assert "governed_evidence.tool" not in attributes(span.attributes), "no tool ran"
    assert marker.encode() not in receiver.exported()


# -- the real app --------------------------------------------------------------------------


def test_search_documents_exports_its_access_decision_and_no_text(receiver: Receiver, built_index: Path) -> None:
    query = "how many days per week may employees work from home"
    refused = "zq7731 " * (MAX_QUERY_CHARS // 7 + 1)
    caller = CallerTrace()
    # The signal-specific variable, a full URL, this time.
    transport = traced_server(
        "documents",
        str(built_index),
        "internal",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{receiver.base_url}/v1/traces",
        OTEL_SERVICE_NAME="evidence-team-a",
    )

    async def body() -> tuple[dict[str, Any], dict[str, Any], Span, Span, Span]:
        async with Client(transport) as client:
            result = await client.call_tool(
                "search_documents", {"query": query, "mode": "hybrid", "confidence": "normal"}, meta=caller.meta
            )
            found = await receiver.wait_for(lambda s: tool_span("search_documents")(s) and caller.continued_by(s))
            bad = await client.call_tool("search_documents", {"query": refused}, raise_on_error=False)
            assert bad.is_error
            failed = await receiver.wait_for(
                lambda s: tool_span("search_documents")(s) and s.status.code == Status.STATUS_CODE_ERROR
            )
            missing = await client.call_tool("read_passage", {"citation_id": "zq7731-no-such"}, raise_on_error=False)
            assert missing.is_error
            denied = await receiver.wait_for(tool_span("read_passage"))
            return result.structured_content, found[0], found[1], failed[1], denied[1]

    response, resource, span, failed, denied = asyncio.run(body())
    # The operator's name for the service wins over ours; the version stays.
    assert (resource["service.name"], resource["service.version"]) == ("evidence-team-a", __version__)
    results = response["results"]
    assert results, response
    labels = {r["classification"] for r in results}
    assert "internal" in labels, labels
    assert ours(span) == {
        "governed_evidence.tool": "search_documents",
        # A stdio server's caller is whoever started it, at the server's ceiling.
        "governed_evidence.caller.clearance": "internal",
        "governed_evidence.ceiling": "internal",
        "governed_evidence.clearance_applied": "internal",
        "governed_evidence.status": response["status"],
        "governed_evidence.results": len(results),
        "governed_evidence.most_sensitive": "internal",
        "governed_evidence.search_mode": response["search_mode"],
    }
    # The refused query never reached the tool: fastmcp's span, its error as a type only.
    assert not ours(failed) and failed.status.message == ""
    # A passage not found (or not visible: the same answer) still records the decision.
    assert ours(denied) == {
        "governed_evidence.tool": "read_passage",
        "governed_evidence.caller.clearance": "internal",
        "governed_evidence.ceiling": "internal",
        "governed_evidence.clearance_applied": "internal",
        "governed_evidence.status": "error",
        "governed_evidence.results": 0,
    }
    exported = receiver.exported()
    assert query.encode() not in exported
    assert b"zq7731" not in exported
    for result in results:
        assert result["text"].encode() not in exported
        # Any eight consecutive words of a passage: none of its text at all.
        words = result["text"].split()
        for i in range(max(1, len(words) - 7)):
            assert " ".join(words[i : i + 8]).encode() not in exported


# -- no endpoint, no cost ------------------------------------------------------------------

#: Run in a fresh process (this one has imported the SDK for the scrubbing test): for each
#: environment in turn configure_tracing declines, a tool call still answers, and at the end
#: nothing of the SDK or the exporter has been imported.
_WITHOUT_ENDPOINT = """
import asyncio, json, os, sys
from fastmcp import Client
from tests.mcp.traced_server import toy_app
from governed_evidence.telemetry import configure_tracing, annotate_call

async def call():
    async with Client(toy_app()) as client:
        return (await client.call_tool("lookup", {"query": "leave"})).structured_content

report = {}
for name, env in json.loads(sys.argv[1]).items():
    for variable in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED"):
        os.environ.pop(variable, None)
    os.environ.update(env)
    report[name] = [configure_tracing(), asyncio.run(call())]
annotate_call({"governed_evidence.tool": "outside any span"})
report["loaded"] = sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter")))
print(json.dumps(report))
"""
NO_ENDPOINT = {
    "unset": {},
    "empty": {"OTEL_EXPORTER_OTLP_ENDPOINT": "", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": " "},
    "sdk-disabled": {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_SDK_DISABLED": "true"},
}


def test_without_an_endpoint_nothing_of_the_sdk_is_imported() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_ENDPOINT, json.dumps(NO_ENDPOINT)],
        env=_child_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {**{name: [False, {"results": 2}] for name in NO_ENDPOINT}, "loaded": []}


def test_an_endpoint_without_the_extra_warns_once_and_traces_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    warnings: list[tuple[str, dict[str, Any]]] = []

    class Recorder:
        def warning(self, event: str, **fields: Any) -> None:
            warnings.append((event, fields))

        def info(self, event: str, **fields: Any) -> None:
            raise AssertionError(f"unexpected {event} {fields}")

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    # The first SDK import configure_tracing makes fails, as it does without the extra.
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    monkeypatch.setattr(telemetry, "log", Recorder())
    monkeypatch.setattr(telemetry, "_warned_missing", False)
    monkeypatch.setattr(telemetry, "_provider", None)
    assert telemetry.configure_tracing() is False
    assert telemetry.configure_tracing() is False
    assert warnings == [("tracing_unavailable", {"reason": telemetry.INSTALL_HINT})]
    assert "governed-evidence[otel]" in telemetry.INSTALL_HINT


@pytest.mark.parametrize(
    ("env", "requested"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "TRUE"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "false"}, True),
    ],
)
def test_what_asks_for_traces(env: dict[str, str], requested: bool) -> None:
    assert telemetry.tracing_requested(env) is requested


def test_annotate_call_sets_the_listed_names_on_a_recording_span_and_nothing_otherwise() -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

    given: dict[str, str | int | bool | None] = {
        "governed_evidence.tool": "search_documents",
        "governed_evidence.results": 3,
        "governed_evidence.from_cache": False,
        "governed_evidence.most_sensitive": None,
        "governed_evidence.query": "zq7731",
    }
    # Outside any span (this process has no SDK provider): nothing to do, nothing raised.
    assert not trace.get_current_span().is_recording()
    telemetry.annotate_call(given)

    provider = TracerProvider()  # this test's own, never the global one
    span = provider.get_tracer("test").start_span("tools/call search_documents")
    with trace.use_span(span, end_on_exit=True):
        telemetry.annotate_call(given)
    assert isinstance(span, ReadableSpan)
    assert dict(span.attributes or {}) == {
        "governed_evidence.tool": "search_documents",
        "governed_evidence.results": 3,
        "governed_evidence.from_cache": False,
    }
    provider.shutdown()


# -- the scrubbing, span by span -----------------------------------------------------------


def test_the_exporter_sends_exception_types_and_status_codes_only() -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import StatusCode

    marker = "zq7731 text of a query"
    finished, sent = InMemorySpanExporter(), InMemorySpanExporter()
    provider = TracerProvider()  # this test's own, never the global one
    provider.add_span_processor(SimpleSpanProcessor(finished))
    with provider.get_tracer("test").start_as_current_span("tools/call search_documents") as span:
        span.set_attribute("governed_evidence.results", 3)
        span.record_exception(ValueError(marker))
        span.set_status(StatusCode.ERROR, marker)
    provider.shutdown()
    [raw] = finished.get_finished_spans()
    assert marker.encode() in encode_spans([raw]).SerializeToString(), "the unscrubbed span does carry it"

    assert telemetry._scrubbing(sent).export([raw]).name == "SUCCESS"
    [scrubbed] = sent.get_finished_spans()
    assert marker.encode() not in encode_spans([scrubbed]).SerializeToString()
    assert scrubbed.status.status_code == StatusCode.ERROR and scrubbed.status.description is None
    assert [dict(e.attributes or {}) for e in scrubbed.events] == [
        {"exception.type": "ValueError", "exception.escaped": "False"}
    ]
    assert scrubbed.context == raw.context and scrubbed.parent == raw.parent and scrubbed.name == raw.name
    assert dict(scrubbed.attributes or {}) == {"governed_evidence.results": 3}
