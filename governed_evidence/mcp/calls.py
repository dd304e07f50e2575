"""Each tool call's caller, the service at their level, and the record of the call.

Over stdio the caller is the process's own user, at the server's ceiling. Over HTTP the
caller comes from the verified credential of the request (fastmcp's access token, which the
verifiers in :mod:`governed_evidence.access` fill with a :class:`Caller`), and the
documents are searched by the service at ``min(server ceiling, caller clearance)``, so the
ceiling is applied per request exactly as it is over stdio. No tool argument can name a
caller or a clearance.

Every call is logged (``run_tool``); with an audit sink it is also written to the audit
trail, and with tracing on, its access decision is added to the request's span.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from fastmcp.server.dependencies import get_access_token

from governed_evidence.access.caller import CALLER_CLAIM, Caller
from governed_evidence.config import Classification
from governed_evidence.errors import ConfigError, NotClearedError
from governed_evidence.logging import get_logger
from governed_evidence.mcp.audit import AuditSink, returned
from governed_evidence.mcp.errors import CallRecorder, run_tool
from governed_evidence.mcp.receipted import with_data_receipt, with_passage_receipt
from governed_evidence.receipts.issue import ReceiptIssuer
from governed_evidence.search.levels import LevelServices
from governed_evidence.telemetry import annotate_call

if TYPE_CHECKING:
    from governed_evidence.search.service import SearchService

__all__ = ["NOT_CLEARED_MESSAGE", "Calls", "stdio_caller"]

T = TypeVar("T")
log = get_logger("mcp")

NOT_CLEARED_MESSAGE = (
    "This caller's credential grants no clearance for the documents; the statistics tools still "
    "work. Ask the server's operator for a credential with a clearance."
)


def _label(level: Classification | None) -> str:
    return level.label if level is not None else "none"


def stdio_caller(ceiling: Classification) -> Caller:
    """The caller of a stdio server: whoever started it, at its ceiling."""
    return Caller(name="stdio", clearance=ceiling, via="stdio")


class Calls:
    """Resolves each call's caller and runs the call at their level, recorded."""

    def __init__(
        self,
        levels: LevelServices,
        *,
        anonymous: Caller | None,
        audit: AuditSink | None = None,
        transport: str = "stdio",
        receipts: ReceiptIssuer | None = None,
    ) -> None:
        self.levels = levels
        self.ceiling = levels.ceiling
        #: The caller of a request without a credential (stdio, or a network the operator
        #: declared the boundary); None: every request must carry a credential.
        self.anonymous = anonymous
        self.audit = audit
        self.transport = transport
        #: Receipts of the answers that cite (unsigned without a receipt key).
        self.receipts = receipts or ReceiptIssuer()

    def caller(self) -> Caller:
        token = get_access_token()
        if token is None:
            # With authentication on, fastmcp refuses a request without a credential before
            # any tool runs; a caller reaching here without one is given nothing.
            return self.anonymous or Caller(name="unauthenticated", clearance=None, via="network")
        try:
            return Caller.from_claim(token.claims.get(CALLER_CLAIM))
        except ConfigError as exc:
            log.error("caller_unreadable", reason=str(exc))
            return Caller(name="unidentified", clearance=None, via="token")

    def applied(self, caller: Caller) -> Classification | None:
        return caller.effective(self.ceiling)

    def service_for(self, caller: Caller) -> SearchService:
        level = self.applied(caller)
        if level is None:
            raise NotClearedError(NOT_CLEARED_MESSAGE)
        return self.levels.at(level)

    def documents(
        self,
        tool: str,
        fn: Callable[[SearchService], T],
        count: Callable[[T], int],
        *,
        query: str | None = None,
        arguments: dict[str, Any] | None = None,
    ) -> T:
        """A documents tool call, answered by the service at the caller's level.

        With ``arguments`` (the tool's, as called), an answer that cites carries its receipt.
        """
        caller = self.caller()
        applied = self.applied(caller)

        def answer() -> T:
            service = self.service_for(caller)
            result = fn(service)
            if arguments is None:
                return result
            return with_passage_receipt(self.receipts, tool, arguments, service, result)

        return run_tool(
            tool,
            answer,
            count,
            record=self._recorder(caller, applied, query=query),
            ceiling=_label(applied),
            **self._who(caller),
        )

    def statistics(
        self,
        tool: str,
        provider: str,
        fn: Callable[[], T],
        count: Callable[[T], int],
        *,
        arguments: dict[str, Any] | None = None,
    ) -> T:
        """A statistics tool call: any verified caller, whatever their clearance.

        With ``arguments``, an answer read from one provider response carries its receipt.
        """
        caller = self.caller()

        def answer() -> T:
            result = fn()
            if arguments is None:
                return result
            return with_data_receipt(self.receipts, tool, arguments, self.applied(caller), result)

        return run_tool(
            tool,
            answer,
            count,
            record=self._recorder(caller, self.applied(caller), provider=provider),
            provider=provider,
            **self._who(caller),
        )

    def _who(self, caller: Caller) -> dict[str, str]:
        # The log line names the caller over HTTP; over stdio there is only one.
        return {} if caller.via == "stdio" else {"caller": caller.name, "via": caller.via}

    def _recorder(
        self,
        caller: Caller,
        applied: Classification | None,
        *,
        query: str | None = None,
        provider: str | None = None,
    ) -> CallRecorder:
        def record(tool: str, status: str, result: object, results: int, ms: float, error: str | None) -> None:
            summary = returned(result)
            annotate_call(
                {
                    "governed_evidence.tool": tool,
                    "governed_evidence.caller.clearance": _label(caller.clearance),
                    "governed_evidence.ceiling": self.ceiling.label,
                    "governed_evidence.clearance_applied": _label(applied),
                    "governed_evidence.status": status,
                    "governed_evidence.results": results,
                    "governed_evidence.most_sensitive": summary.most_sensitive,
                    "governed_evidence.search_mode": summary.search_mode,
                    "governed_evidence.from_cache": summary.from_cache,
                }
            )
            if self.audit is not None:
                self.audit.record(
                    tool=tool,
                    caller=caller,
                    clearance_applied=applied,
                    status=status,
                    results=results,
                    result=summary,
                    ms=ms,
                    error=error,
                    query=query,
                    provider=provider,
                )

        return record
