"""The errors the client raises on purpose: one root, `ArenaClientError`, whose docstring draws
the tree."""

from __future__ import annotations


class ArenaClientError(Exception):
    """Root of every error the client raises on purpose; catch it to catch them all.

        ArenaClientError
         ├── AuthenticationError   the handshake was refused (HTTP 401/403): missing or unknown token.
         │                         Never retried; raised by connect, and by every waiting call when a
         │                         reconnect is refused.
         ├── ConnectionFailed      no connection could be made for ``give_up_after`` seconds; waiting
         │                         calls fail with it (``idempotency_keys`` names the dropped events, so
         │                         they can be resent later with the same keys, safely).
         ├── ClientClosed          the client is closed (or not connected yet); nothing more is sent.
         │    └── FrameTooLarge    the server closed with 1009: its max_frame_bytes is below the
         │                         client's. Not retried (the same frame would be refused again).
         ├── EventRejected         the server rejected an event (``reason``, ``idempotency_key``), e.g.
         │                         value_out_of_range, period_closed. ``unavailable`` is raised only
         │                         after ``retry_unavailable_for`` seconds of retries.
         └── QueryFailed           the server answered an error frame (``code``, ``message``):
                                   member_not_found, unknown_period, period_not_retained...;
                                   ``not_ready`` only after ``retry_unavailable_for`` seconds.
    """


class AuthenticationError(ArenaClientError):
    """The server refused the token (HTTP ``status`` 401 or 403). Not retried: fix the token."""

    def __init__(self, status: int) -> None:
        super().__init__(f"the server refused the token (HTTP {status})")
        self.status = status


class ConnectionFailed(ArenaClientError):
    """No connection for ``give_up_after`` seconds. ``idempotency_keys`` lists the events of the
    failed calls: resending them later with the same keys is safe (journaled ones come back
    ``duplicate``)."""

    def __init__(self, message: str, idempotency_keys: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.idempotency_keys = idempotency_keys


class ClientClosed(ArenaClientError):
    """The client is closed or not connected: use ``async with ArenaClient(...)`` or `connect`."""


class FrameTooLarge(ClientClosed):
    """The server closed the connection with 1009 (a frame over its ``max_frame_bytes``). Every
    waiting call fails with it and the client stops: set ``max_frame_bytes`` to the server's."""

    def __init__(self, max_frame_bytes: int) -> None:
        super().__init__(
            f"the server refused a frame of up to {max_frame_bytes} bytes (close 1009): "
            "set ArenaClient(max_frame_bytes=...) to the server's max_frame_bytes"
        )


class EventRejected(ArenaClientError):
    """The server rejected an event. ``reason`` is the wire code (value_out_of_range,
    period_closed, idempotency_key_reused, forbidden, invalid_event, ...); ``message`` the
    server's line for a person (the field and the rule), for a log, never to match on."""

    def __init__(self, reason: str, idempotency_key: str | None, message: str | None = None) -> None:
        super().__init__(f"event {idempotency_key!r} rejected: {reason}" + (f" ({message})" if message else ""))
        self.reason = reason
        self.idempotency_key = idempotency_key
        self.message = message


class QueryFailed(ArenaClientError):
    """The server answered an error frame: ``code`` (member_not_found, unknown_period,
    period_not_retained, unknown_board, invalid_request, not_ready, unavailable...) and ``message``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
