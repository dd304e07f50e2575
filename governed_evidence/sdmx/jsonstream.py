"""A JSON message read as a stream of events, so what is not needed is never built.

``json.loads`` builds every value of a message before anything can look at it: a 16 MiB
answer of empty objects becomes hundreds of megabytes of Python objects, and the call
holds the interpreter lock from its first byte to its last. Here the message is read by
ijson's C parser (yajl) as events, fed in :data:`CHUNK` slices from Python so that other
threads get the interpreter between slices, and the readers decide member by member:

- :meth:`Events.skip` passes over a value without building anything (each event still
  counts against the reader's limit of events, which bounds the processor time);
- :meth:`Events.build` builds a value the reader needs (a structure, one observation),
  counting the values it builds against a :class:`Budget` and refusing nesting deeper
  than :data:`MAX_DEPTH`, so what is built is bounded whatever the message holds.

Numbers are read as Python reads them (``int``, or ``float`` for a fraction or exponent),
so values come out as ``json.loads`` would have given them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import ijson  # type: ignore[import-untyped]

from governed_evidence.errors import ResponseTooLargeError, UnusableResponseError

__all__ = ["CHUNK", "MAX_DEPTH", "Budget", "Events", "Key"]

#: Bytes handed to the parser at a time; between two, the reading thread lets others run. The C
#: parser turns a whole slice into events before the first is read (some 40 bytes of events per
#: byte of ``{},{},...``), so a slice's events, not the message, are what is held at once.
CHUNK = 16 * 1024
#: Nesting an SDMX-JSON value needs (a structure's names are five or six levels deep).
MAX_DEPTH = 32

_START = frozenset({"start_map", "start_array"})
_END = frozenset({"end_map", "end_array"})
_SCALARS = frozenset({"null", "boolean", "integer", "double", "number", "string"})


class Budget:
    """How many values (scalars, objects, arrays) may still be built from one message."""

    def __init__(self, values: int) -> None:
        self.left = values

    def take(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise ResponseTooLargeError("the provider's JSON message holds more than this server reads")


class _Reader:
    """``body`` in slices, yielding the interpreter lock between them."""

    def __init__(self, body: bytes) -> None:
        self._view = memoryview(body)
        # A UTF-8 byte order mark is not JSON, but json.loads and providers' files allow it.
        self._at = 3 if body.startswith(b"\xef\xbb\xbf") else 0

    def read(self, size: int = CHUNK) -> bytes:
        # sleep(0) releases the lock the C parser holds while it works on a slice: a thread
        # waiting for it (another caller's search) runs now instead of at the next forced switch.
        time.sleep(0)
        end = min(self._at + min(size, CHUNK), len(self._view))
        chunk = bytes(self._view[self._at : end])
        self._at = end
        return chunk


Key = str


def _too_many() -> ResponseTooLargeError:
    return ResponseTooLargeError(
        "the provider's JSON message holds more than this server reads; narrow the key or the period"
    )


class Events:
    """The events of one JSON text, read forward once, at most ``limit`` of them.

    Passing over a value costs an event at a time, so the count of events read, built or
    not, is what bounds the processor time a message can take.
    """

    def __init__(self, body: bytes, limit: int) -> None:
        self._events: Iterator[tuple[str, Any]] = ijson.basic_parse(_Reader(body), buf_size=CHUNK, use_float=True)
        self.left = limit

    def next(self) -> tuple[str, Any]:
        """The next event; UnusableResponseError for malformed JSON or a text that ends early."""
        self.left -= 1
        if self.left < 0:
            raise _too_many()
        try:
            return next(self._events)
        except StopIteration:
            raise UnusableResponseError("the provider's response is not valid JSON") from None
        except ijson.JSONError:
            raise UnusableResponseError("the provider's response is not valid JSON") from None
        except (ValueError, UnicodeDecodeError):
            # Numbers longer than Python converts, and text that is not UTF-8.
            raise UnusableResponseError("the provider's response is not valid JSON") from None

    def end(self) -> None:
        """Check that nothing but white space follows the value just read."""
        try:
            for _ in self._events:
                raise UnusableResponseError("the provider's response is not valid JSON")
        except (ijson.JSONError, ValueError, UnicodeDecodeError):
            raise UnusableResponseError("the provider's response is not valid JSON") from None

    def members(self, first: tuple[str, Any]) -> Iterator[Key]:
        """The keys of the object that ``first`` opens; the caller reads or skips each value."""
        if first[0] != "start_map":
            self.skip(first)
            return
        while True:
            event, value = self.next()
            if event == "end_map":
                return
            yield str(value)

    def elements(self, first: tuple[str, Any]) -> Iterator[tuple[str, Any]]:
        """The first event of each element of the array that ``first`` opens."""
        if first[0] != "start_array":
            self.skip(first)
            return
        while True:
            event = self.next()
            if event[0] == "end_array":
                return
            yield event

    def skip(self, first: tuple[str, Any]) -> None:
        """Pass over the value that ``first`` starts, building nothing."""
        if first[0] not in _START:
            return
        depth = 1
        events = self._events
        left = self.left
        try:
            # The hottest loop of a hostile message: plain iteration, no per-event calls.
            for event, _value in events:
                left -= 1
                if event in _START:
                    depth += 1
                    if left < 0:
                        raise _too_many()
                elif event in _END:
                    depth -= 1
                    if depth == 0:
                        self.left = left
                        return
                elif left < 0:
                    raise _too_many()
        except (ijson.JSONError, ValueError, UnicodeDecodeError):
            raise UnusableResponseError("the provider's response is not valid JSON") from None
        raise UnusableResponseError("the provider's response is not valid JSON")

    def build(self, first: tuple[str, Any], budget: Budget, *, drop: frozenset[str] = frozenset()) -> Any:
        """The value that ``first`` starts, built; members named in ``drop`` are skipped at every level."""
        return self._build(first, budget, drop, 0)

    def _build(self, first: tuple[str, Any], budget: Budget, drop: frozenset[str], depth: int) -> Any:
        event, value = first
        budget.take()
        if event in _SCALARS:
            return value
        if depth >= MAX_DEPTH:
            raise UnusableResponseError("the provider's JSON nests deeper than any SDMX-JSON message")
        if event == "start_map":
            built: dict[str, Any] = {}
            for key in self.members(first):
                if key in drop:
                    self.skip(self.next())
                else:
                    built[key] = self._build(self.next(), budget, drop, depth + 1)
            return built
        if event == "start_array":
            return [self._build(e, budget, drop, depth + 1) for e in self.elements(first)]
        raise UnusableResponseError("the provider's response is not valid JSON")
