"""Usage read from the provider's own responses, as the metering proxy relays them.

The proxy (``provider/proxy.py``) hands every response body to a :class:`ResponseMeter` chunk by chunk
as it forwards it; the meter reads the usage the provider reports — Anthropic Messages
(``message_start.message.usage`` and ``message_delta.usage``, streamed or whole), OpenAI chat
completions (``usage`` of the whole body or of the last chunk of a stream), OpenAI Responses
(``response.completed``'s ``response.usage``) and Gemini (``usageMetadata`` of each chunk) — each
format's module in ``provider/wire/`` reads its own documents — without holding more
than one SSE event at a time.  Figures are bounded like the host stream's (docs/design.md §10): a
provider's response is trusted more than the host's stdout, but a broken or hostile upstream still
cannot crash the runner or lower a count.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_atlante.hosts.streams import MAX_STREAM_TOKENS, stream_cost
from pytest_atlante.provider.served import ToolCallReader
from pytest_atlante.provider.wire import WIRE_FORMATS
from pytest_atlante.records import Usage

#: One SSE event (or one whole JSON body) larger than this is not parsed for usage.  As large as the
#: largest response the proxy relays, so every event of a relayed response is read (a Responses
#: ``response.completed`` repeats the whole output: 8.9 MB carried 90,000 tokens unseen at 4 MiB);
#: the proxy has one response in flight per trial, so this is also what a trial's meter can hold.
MAX_EVENT_BYTES = 64 * 1024 * 1024

_FIELDS = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")


def _count(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_STREAM_TOKENS:
        return value
    return None


def served_model(body: dict[str, Any]) -> str | None:
    """The model a response document says answered, as the first format of the table that finds a
    name in it reads it (``provider/wire/``): Anthropic's ``message_start.message.model`` (or a whole
    message's ``model``), OpenAI chat's ``model``, Responses' ``response.model``, Gemini's
    ``modelVersion``."""
    return next((model for wire in WIRE_FORMATS.values() if (model := wire.served_model(body)) is not None), None)


def says_something(body: dict[str, Any]) -> bool:
    """One JSON document of a model response (a whole body or one SSE event) holds text, thinking or
    a tool call, as the first format of the table that decides on it says (``provider/wire/``)."""
    return next((said for wire in WIRE_FORMATS.values() if (said := wire.says_something(body)) is not None), False)


class ResponseMeter:
    """The usage of one model response, read as its bytes pass.

    Each field keeps the largest value the response reported for it (Anthropic's ``message_delta``
    repeats the message's cumulative counts), except the output count, which ``message_delta``
    states finally over ``message_start``'s placeholder of 1.
    """

    def __init__(self, content_type: str, length: int | None = None) -> None:
        self._sse = "text/event-stream" in content_type.lower()
        self._length = length  # a whole body is read as soon as it is complete, before it is relayed
        self._buffer = bytearray()
        self._scanned = 0  # bytes of ``_buffer`` already searched for an event's end
        self._overflow = False
        self._fields: dict[str, int] = {}
        self.cost_usd: float | None = None
        self.reported = False  # a usage object was seen in the response
        # Text, thinking or a tool call was seen; ``_unread``: part of the response was not parsed
        # (too long), so it cannot be called empty.
        self.said_something = False
        self._unread = False
        self.tool_calls = ToolCallReader()  # what the model called: the stream's claims are checked against it
        self.model: str | None = None  # the model the provider says answered (its first document naming one)

    @property
    def usage(self) -> Usage:
        return Usage(**{name: self._fields.get(name, 0) for name in _FIELDS})

    def feed(self, chunk: bytes) -> None:
        if not self._sse:
            if len(self._buffer) + len(chunk) <= MAX_EVENT_BYTES:
                self._buffer.extend(chunk)
            else:
                self._overflow = self._unread = True
            if self._length is not None and len(self._buffer) == self._length and not self._overflow:
                self._document(bytes(self._buffer))
                self._buffer.clear()
                self._length = None
            return
        self._buffer.extend(chunk.replace(b"\r\n", b"\n"))
        # Searched from where the last search ended (less the one byte a "\n\n" can straddle): a
        # long event costs one pass over its bytes, not one per chunk.
        while (end := self._buffer.find(b"\n\n", max(self._scanned - 1, 0))) >= 0:
            event = bytes(self._buffer[:end])
            del self._buffer[: end + 2]
            self._scanned = 0
            self._event(event)
        self._scanned = len(self._buffer)
        if len(self._buffer) > MAX_EVENT_BYTES:  # one event this long carries no usage we read
            self._buffer.clear()
            self._scanned = 0
            self._unread = True

    @property
    def empty(self) -> bool:
        """The whole response was read and held no text, thinking or tool call: the provider's empty
        answer, which a host may report as its own failure (Gemini CLI, host-facts-gemini §11)."""
        return not self.said_something and not self._unread

    def finish(self) -> None:
        """The response ended: read a whole JSON body, or the last SSE event without its blank line."""
        data, self._buffer = bytes(self._buffer), bytearray()
        if self._sse:
            if data.strip():
                self._event(data)
        elif not self._overflow:
            self._document(data)
        self.tool_calls.finish()

    def _event(self, block: bytes) -> None:
        lines = [line[5:].lstrip() for line in block.split(b"\n") if line.startswith(b"data:")]
        if lines:
            self._document(b"\n".join(lines))

    def _document(self, data: bytes) -> None:
        try:
            body = json.loads(data)
        except (ValueError, RecursionError):
            return  # "[DONE]", a keep-alive, junk: no usage
        if not isinstance(body, dict):
            return
        self.tool_calls.read(body)
        if self.model is None:
            self.model = served_model(body)
        self.said_something = self.said_something or says_something(body)
        # The formats claim their documents in the table's order (Anthropic's typed events first).
        reading = next((found for wire in WIRE_FORMATS.values() if (found := wire.read_usage(body)) is not None), None)
        if reading is None or not reading.reported:
            return
        self.reported = True
        for name, value in reading.fields.items():
            if name == "outputTokens" and reading.final_output and (count := _count(value)) is not None:
                self._fields[name] = count
            else:
                self._raise(name, value)
        cost = stream_cost(reading.cost)
        if cost is not None:
            self.cost_usd = max(cost, self.cost_usd or 0.0)

    def _raise(self, name: str, value: object) -> None:
        count = _count(value)
        if count is not None and count > self._fields.get(name, 0):
            self._fields[name] = count
