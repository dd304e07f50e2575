"""Optional tracing: one span per MCP request, exported over OTLP/HTTP, carrying the access decision.

fastmcp already opens a SERVER span for every request through opentelemetry-api, continuing
the caller's trace when the request's ``_meta`` carries a W3C ``traceparent``. Without an SDK
those spans are no-ops. :func:`configure_tracing` installs the SDK with an OTLP/HTTP
(protobuf) exporter, but only when the operator names a collector with
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``); the SDK comes
with the ``otel`` extra (``pip install 'governed-evidence[otel]'``; the image carries it).
Unset, nothing of the SDK is imported and every span stays a no-op: no tracing, no cost.

Each tool call adds its access decision to that span with :func:`annotate_call`. Only these
attributes are set (:data:`CALL_ATTRIBUTES`; a value of None leaves the attribute out):

``governed_evidence.tool``
    The tool called.
``governed_evidence.caller.clearance``
    The clearance the caller's credential grants (a level label, or ``none``).
``governed_evidence.ceiling``
    The server's ceiling (``GOVERNED_EVIDENCE_CEILING``).
``governed_evidence.clearance_applied``
    The level the call was answered at, the lower of the two (or ``none``: no documents).
``governed_evidence.status``
    The call's status (``OK``, ``NO_RELEVANT_CONTEXT``, ``error``, ...).
``governed_evidence.results``
    How many items the call returned (an integer).
``governed_evidence.most_sensitive``
    The most sensitive classification among the passages returned (absent when none).
``governed_evidence.search_mode``
    The search mode that answered (``hybrid``, ``keyword``, ``semantic``), for searches.
``governed_evidence.from_cache``
    Whether a statistics answer came from the cache (a boolean), for statistics.

Never query text or passage text: the names are fixed here, and the exporter is wrapped so
that exception messages, stack traces and status descriptions (which can quote a tool's
arguments, e.g. a pydantic error on an over-long query) leave the process as the exception
type only. fastmcp's own attributes name the method, the tool, the session, the JSON-RPC id
and, over HTTP, the authenticated subject; never the arguments.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from opentelemetry import trace

from governed_evidence import __version__
from governed_evidence.logging import get_logger

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = [
    "CALL_ATTRIBUTES",
    "ENDPOINT_VARIABLES",
    "INSTALL_HINT",
    "SERVICE_NAME",
    "annotate_call",
    "configure_tracing",
    "shutdown_tracing",
    "tracing_requested",
]

log = get_logger("telemetry")

#: Either names the collector; the signal-specific one wins (the exporter reads them itself).
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
SERVICE_NAME = "governed-evidence"
INSTALL_HINT = "install governed-evidence[otel] (pip install 'governed-evidence[otel]') to export traces"

#: The only attributes :func:`annotate_call` sets: a closed list, so that no future caller
#: can put an argument (a query, a passage) on a span that leaves the machine.
CALL_ATTRIBUTES = frozenset(
    {
        "governed_evidence.tool",
        "governed_evidence.caller.clearance",
        "governed_evidence.ceiling",
        "governed_evidence.clearance_applied",
        "governed_evidence.status",
        "governed_evidence.results",
        "governed_evidence.most_sensitive",
        "governed_evidence.search_mode",
        "governed_evidence.from_cache",
    }
)

#: What an exported event keeps of its attributes: which exception, never its message or trace.
_EVENT_ATTRIBUTES = frozenset({"exception.type", "exception.escaped"})

_provider: TracerProvider | None = None
_warned_missing = False


def tracing_requested(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the operator asked for traces: a collector endpoint set, the SDK not disabled."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(env.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def configure_tracing() -> bool:
    """Install the SDK and the OTLP/HTTP exporter when an endpoint is set; True if traces go out.

    Idempotent (the global tracer provider can be set once per process). The endpoint, the
    headers (a collector's API key) and the timeout are read by the exporter from the standard
    ``OTEL_EXPORTER_OTLP_*`` variables and never logged here. A provider someone else already
    installed (``opentelemetry-instrument``) is left in place and used as it is, with its own
    exporters: the scrubbing below is then theirs to do.
    """
    global _provider, _warned_missing
    if _provider is not None:
        return True
    if not tracing_requested():
        return False
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import OTELResourceDetector, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        if not _warned_missing:
            _warned_missing = True
            log.warning("tracing_unavailable", reason=INSTALL_HINT)
        return False
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        log.info("tracing_on", exporter="existing tracer provider")
        return True
    # Our name and version unless the operator names the service (OTEL_SERVICE_NAME,
    # OTEL_RESOURCE_ATTRIBUTES), say to tell two servers apart.
    named = OTELResourceDetector().detect().attributes
    resource = Resource.create({"service.name": SERVICE_NAME, "service.version": __version__, **named})
    provider = TracerProvider(resource=resource)
    # Batched: a tool call only queues its span; a slow or absent collector never delays an answer.
    provider.add_span_processor(BatchSpanProcessor(_scrubbing(OTLPSpanExporter())))
    trace.set_tracer_provider(provider)
    _provider = provider
    log.info("tracing_on", exporter="otlp/http")
    return True


def shutdown_tracing() -> None:
    """Export the spans still queued and stop the exporter (``serve`` calls it on its way out)."""
    global _provider
    provider, _provider = _provider, None
    if provider is not None:
        provider.shutdown()


def annotate_call(attributes: Mapping[str, str | int | bool | None]) -> None:
    """Add a tool call's access decision to the current span (the request's fastmcp span).

    A cheap no-op when the span is not recording (tracing off, or the request not sampled).
    Names outside :data:`CALL_ATTRIBUTES` and None values are left out.
    """
    span = trace.get_current_span()
    if not span.is_recording():
        return
    span.set_attributes({k: v for k, v in attributes.items() if v is not None and k in CALL_ATTRIBUTES})


def _scrubbed(span: ReadableSpan) -> ReadableSpan:
    """The span as exported: events keep only the exception type, the status only its code."""
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.trace import Status

    events = [
        Event(
            event.name,
            {k: v for k, v in (event.attributes or {}).items() if k in _EVENT_ATTRIBUTES},
            event.timestamp,
        )
        for event in span.events
    ]
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=span.attributes,
        events=events,
        links=span.links,
        kind=span.kind,
        status=Status(span.status.status_code),
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def _scrubbing(inner: SpanExporter) -> SpanExporter:
    """``inner`` handed scrubbed copies of the spans (:func:`_scrubbed`) and nothing else."""
    # Defined here, not at the top, so that importing this module never imports the SDK.
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class ScrubbedExporter(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return inner.export([_scrubbed(span) for span in spans])

        def shutdown(self) -> None:
            inner.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return inner.force_flush(timeout_millis)

    return ScrubbedExporter()
