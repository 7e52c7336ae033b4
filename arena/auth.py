"""Bearer tokens: stored as sha256 hex, compared in constant time, never logged."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from collections.abc import Sequence
from typing import TypeVar

from arena.config import Admin, GameServer

T = TypeVar("T", GameServer, Admin)


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(32)


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def identify(authorization: str | None, principals: Sequence[T]) -> T | None:
    """The principal whose token this header carries. Compares against every entry so the time
    taken does not say which one matched. O(len(principals))."""
    token = bearer_token(authorization)
    if token is None:
        return None
    digest = token_sha256(token).encode()
    found: T | None = None
    for principal in principals:
        if hmac.compare_digest(digest, principal.token_sha256.encode()):
            found = principal
    return found


_SECRET = re.compile(
    r"(?i)(authorization\W+|bearer\s+|basic\s+)\S[^\r\n]*"
    # a credential in a URL's query string, as the access log and the handshake lines write it
    r"|([?&][\w.-]*(?:token|secret|password|passwd|auth|api[_-]?key)[\w.-]*=)[^&\s\"']*"
)


def _blank(found: re.Match[str]) -> str:
    return (found[1] or found[2]) + "[redacted]"


class RedactTokens(logging.Filter):
    """A handler filter that blanks credentials in any record: at DEBUG, websockets logs every
    handshake header (``< authorization: Bearer ...``) through uvicorn's logger, and the access
    log writes every URL with its query string (``/v1/ws?token=...``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = _SECRET.sub(_blank, message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True
