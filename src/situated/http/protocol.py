"""The HTTP/1.1 server `situated serve` runs: uvicorn with its h11 protocol, every input of a
connection bounded (`DoorLimits`).

uvicorn's default protocol (httptools) reads a request head of any size, and neither of its
protocols times out a connection that is silent, sends half a head, or declares a body it never
sends. `GuardedH11Protocol` adds what is missing to uvicorn's h11 protocol:

- the request line and headers in at most `head_bytes` (h11's incomplete-event limit), else
  431 and the connection closed before another byte is buffered;
- the whole head within `head_timeout` seconds of the connection (or of the previous response),
  however slowly it trickles in, else 408 (a silent connection is closed);
- a body never silent for `body_timeout` seconds, else 408 and the request ended;
- at most `connections` open connections per process, else 503 and closed at once.

Header count (`head_fields`), a complete head's size and the body's (`body_bytes`) are enforced
in front of the app (`situated.http.limits`), idle keep-alive by uvicorn (`keep_alive`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from situated.http.limits import DoorLimits
from situated.http.logs import log_config


class DoorConfig(uvicorn.Config):
    """uvicorn's configuration with `GuardedH11Protocol` and `limits` (picklable: worker
    processes receive it)."""

    def __init__(self, app: Any, limits: DoorLimits | None = None, **kw: Any) -> None:
        self.limits = limits or DoorLimits()
        kw.setdefault("log_config", log_config())
        super().__init__(
            app, http=GuardedH11Protocol, h11_max_incomplete_event_size=self.limits.head_bytes,
            timeout_keep_alive=self.limits.keep_alive,  # type: ignore[arg-type]
            server_header=False, **kw,
        )


def run(config: DoorConfig) -> None:
    """Serve until interrupted, in one process or `config.workers` (as `uvicorn.run` does)."""
    from uvicorn.supervisors import Multiprocess

    server = uvicorn.Server(config)
    if config.workers > 1:
        Multiprocess(config, sockets=[config.bind_socket()]).run()
    else:
        server.run()


DRAIN_BYTES = 1 << 20
DRAIN_SECONDS = 1.0


def _raw(status: int, reason: str, message: str) -> bytes:
    body = json.dumps({"error": reason.replace(" ", ""), "message": message}).encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the head, body and connection bounds of `DoorLimits`."""

    def __init__(self, config: uvicorn.Config, *args: Any, **kw: Any) -> None:
        super().__init__(config, *args, **kw)
        self.limits: DoorLimits = getattr(config, "limits", DoorLimits())
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._refused = False
        self._draining = -1
        """Bytes still to discard after an answer that closes (-1: not draining)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.limits.connections:
            self.transport = transport
            self._refused = True
            logging.getLogger("uvicorn.error").warning(
                "refused a connection: %d are open", len(self.connections))
            transport.write(_raw(503, "Service Unavailable", "too many open connections"))
            transport.close()
            return
        super().connection_made(transport)
        self._arm_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._refused:
            return
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._draining >= 0:  # answered and closing: read and drop, up to a bound
            self._draining -= len(data)
            if self._draining < 0:
                self.transport.close()
            return
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_head()  # the next request's head has the same deadline

    def send_400_response(self, msg: str) -> None:
        buffered, _ = self.conn.trailing_data
        if len(buffered) > self.limits.head_bytes:
            self._close_with(431, "Request Header Fields Too Large",
                             f"request head larger than {self.limits.head_bytes} bytes")
        else:
            super().send_400_response(msg)

    # -- timers ------------------------------------------------------------------------------

    def _follow(self) -> None:
        """After bytes arrived: a complete head stops the head deadline; a body in progress
        (re)starts the silence limit; a complete request stops both (the app has it)."""
        state = self.conn.their_state
        if state is h11.IDLE:
            return
        self._cancel_head()
        if state is h11.SEND_BODY:
            if self._body_timer is not None:
                self._body_timer.cancel()
            self._body_timer = self.loop.call_later(self.limits.body_timeout, self._body_late)
        elif self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _arm_head(self) -> None:
        self._cancel_head()
        self._head_timer = self.loop.call_later(self.limits.head_timeout, self._head_late)

    def _cancel_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _disarm(self) -> None:
        self._cancel_head()
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a response is still being sent (pipelining): not the client's delay
        buffered, _ = self.conn.trailing_data
        if buffered:
            self._close_with(408, "Request Timeout", f"request head not complete within "
                             f"{self.limits.head_timeout:g} s")
        else:
            self.transport.close()  # silent: nothing to answer

    def _body_late(self) -> None:
        self._body_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.SEND_BODY:
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            self._close_with(408, "Request Timeout", f"request body silent for "
                             f"{self.limits.body_timeout:g} s")
        else:
            self.transport.close()
        if cycle is not None:  # the app reading the body gets `http.disconnect`
            cycle.disconnected = True
            cycle.message_event.set()

    def _close_with(self, status: int, reason: str, message: str) -> None:
        """Answer `status` and close; what the client is still sending is read and dropped
        for a moment (at most `DRAIN_BYTES`, `DRAIN_SECONDS`), so that closing with unread
        bytes does not reset the connection before the client reads the answer."""
        logging.getLogger("uvicorn.error").warning("closed a connection: %s", message)
        if self.cycle is not None:
            self.cycle.disconnected = True  # the app's own response goes nowhere
        self._disarm()
        self.transport.write(_raw(status, reason, message))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._draining = DRAIN_BYTES
        self.loop.call_later(DRAIN_SECONDS, self.transport.close)
