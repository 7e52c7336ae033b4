"""One signed POST of a webhook delivery. The HTTP client is httpx (a runtime dependency): an
async client with per-request timeouts and connection reuse that the event loop never waits on."""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from arena_client.signature import DELIVERY_HEADER, SIGNATURE_HEADER, sign

ANSWER_CHARS = 200
"""The most of a receiver's refusal kept in a delivery's last error."""


class Sender:
    def __init__(self, timeout_seconds: float) -> None:
        self._client = httpx.AsyncClient(timeout=timeout_seconds, follow_redirects=False)

    async def post(self, url: str, delivery: str, body: bytes, secrets: Sequence[str]) -> str | None:
        """POST ``body`` to ``url`` as delivery ``delivery``, signed with ``secrets`` now; None
        when the receiver answered 2xx, else what went wrong (one line)."""
        headers = {"content-type": "application/json", "user-agent": "arena-webhooks", DELIVERY_HEADER: delivery,
                   SIGNATURE_HEADER: sign(secrets, body)}
        try:
            response = await self._client.post(url, content=body, headers=headers)
        except httpx.TimeoutException:
            return "timed out waiting for the receiver"
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}".strip()
        if 200 <= response.status_code < 300:
            return None
        text = " ".join(response.text[:ANSWER_CHARS].split())
        return f"HTTP {response.status_code}" + (f": {text}" if text else "")

    async def close(self) -> None:
        await self._client.aclose()
