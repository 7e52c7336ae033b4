"""Webhook signatures: how Arena signs a delivery and how a receiver checks it, one rule for both
(the server imports this module). It imports nothing but the standard library.

    Arena-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>[,v1=<...>]

During a rotation of the secret the server signs with both secrets (one ``v1=`` each), so a
receiver that knows either accepts the delivery.

    from arena_client import verify_signature
    if not verify_signature(os.environ["ARENA_WEBHOOK_SECRET"], request.headers, body):
        return 400
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Iterable, Mapping

SIGNATURE_HEADER = "Arena-Signature"
DELIVERY_HEADER = "Arena-Delivery"


def _secrets(secrets: str | Iterable[str]) -> list[str]:
    return [secrets] if isinstance(secrets, str) else list(secrets)


def _mac(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()


def sign(secrets: str | Iterable[str], body: bytes, timestamp: int | None = None) -> str:
    """The ``Arena-Signature`` value of ``body`` sent at ``timestamp`` (unix seconds; default:
    now): one ``v1=`` per secret, in the order given."""
    t = int(time.time()) if timestamp is None else timestamp
    return ",".join([f"t={t}"] + [f"v1={_mac(secret, t, body)}" for secret in _secrets(secrets)])


def verify_signature(secrets: str | Iterable[str], headers: Mapping[str, str], body: bytes,
                     tolerance_seconds: float = 300, now: float | None = None) -> bool:
    """Whether ``body`` (the raw bytes received) carries a valid ``Arena-Signature`` in
    ``headers`` (any case of the name) made with one of ``secrets``, at most
    ``tolerance_seconds`` away from ``now`` (default: the clock), which refuses a replay of an old
    delivery. Compared in constant time."""
    value = next((v for k, v in headers.items() if k.lower() == SIGNATURE_HEADER.lower()), None)
    if value is None:
        return False
    timestamp: int | None = None
    macs: list[str] = []
    for part in value.split(","):
        key, _, text = part.strip().partition("=")
        if key == "t" and text.isdigit():
            timestamp = int(text)
        elif key == "v1":
            macs.append(text)
    if timestamp is None or not macs:
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance_seconds:
        return False
    expected = [_mac(secret, timestamp, body) for secret in _secrets(secrets)]
    return any(hmac.compare_digest(mac, want) for mac in macs for want in expected)
