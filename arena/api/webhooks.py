"""The webhooks' admin routes over the outbox (they need an `[[admins]]` token; any node of a
cluster answers them from the shared outbox)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from arena.api.admin import UNAUTHORIZED
from arena.api.http import error_response, int_param, json_response
from arena.api.queries import MAX_LIMIT, check_range
from arena.api.service import Arena
from arena.api.wire import Body
from arena.config import Webhook
from arena.delivery.deliverer import Deliverer
from arena.delivery.outbox import Listing, State
from arena.errors import JournalError, QueryError, invalid_request, not_found

DEFAULT_LIMIT = 100
TABLE_FILTERS = ("board", "period", "period_id", "partition")
"""The deliveries route's filters by table, in `Listing`'s order (``partition=*``: the global table)."""
OUTBOX_DOWN = QueryError("unavailable", "the webhooks' outbox cannot be reached; try again", 503)

WebhookAnswer = Callable[[Deliverer, Webhook, Request], Awaitable[Body]]


def _webhook_route(path: str, answer: WebhookAnswer, method: str) -> Route:
    """An admin route about one webhook (``{webhook}``): 401 without an admin token, 404
    ``unknown_webhook``, 503 ``unavailable`` when the outbox cannot be read."""
    async def endpoint(request: Request) -> Response:
        arena: Arena = request.app.state.arena
        if arena.admin(request.headers.get("authorization")) is None:
            return error_response(UNAUTHORIZED)
        name = request.path_params["webhook"]
        hook = arena.deliverer.webhook(name) if arena.deliverer is not None else None
        try:
            if arena.deliverer is None or hook is None:
                raise not_found("unknown_webhook", f"no webhook named {name!r}")
            return json_response(await answer(arena.deliverer, hook, request))
        except QueryError as exc:
            return error_response(exc)
        except JournalError:
            return error_response(OUTBOX_DOWN)

    return Route(path, endpoint, methods=[method])


async def _webhooks(request: Request) -> Response:
    """`GET /v1/webhooks`: each webhook, its url without credentials, its boards and its deliveries per state."""
    arena: Arena = request.app.state.arena
    if arena.admin(request.headers.get("authorization")) is None:
        return error_response(UNAUTHORIZED)
    if arena.deliverer is None:
        return json_response({"webhooks": []})
    try:
        counts = await arena.deliverer.outbox.counts()
    except JournalError:
        return error_response(OUTBOX_DOWN)
    return json_response({"webhooks": [
        {"id": hook.id, "url": hook.shown_url, "boards": list(hook.boards), "max_age_hours": hook.max_age_hours,
         "deliveries": {str(state): counts.get(hook.id, {}).get(state, 0) for state in State}}
        for hook in arena.config.webhooks]})


async def _deliveries(deliverer: Deliverer, hook: Webhook, request: Request) -> Body:
    params = request.query_params
    state = params.get("state")
    if state is not None and state not in set(State):
        raise invalid_request(f"state must be one of {', '.join(State)}, got {state!r}")
    limit = check_range("limit", int_param(params.get("limit"), "limit", DEFAULT_LIMIT) or 0, 1, MAX_LIMIT)
    after = check_range("after", int_param(params.get("after"), "after", 0) or 0, 0)
    which = Listing(None if state is None else State(state), *(params.get(name) for name in TABLE_FILTERS))
    listed = await deliverer.outbox.listing(hook.id, which, after, limit)
    return {"webhook": hook.id, "deliveries": [d.as_json() for d in listed],
            "next": listed[-1].place if len(listed) == limit else None}


async def _retry(deliverer: Deliverer, hook: Webhook, request: Request) -> Body:
    name = request.path_params["delivery"]
    retried = await deliverer.retry(hook, name)
    if retried is None:
        raise not_found("unknown_delivery", f"webhook {hook.id!r} has no delivery {name!r}")
    return {"webhook": hook.id, **retried.as_json()}


async def _test(deliverer: Deliverer, hook: Webhook, request: Request) -> Body:
    return await deliverer.test(hook)


routes = [
    Route("/v1/webhooks", _webhooks, methods=["GET"]),
    _webhook_route("/v1/webhooks/{webhook}/deliveries", _deliveries, "GET"),
    _webhook_route("/v1/webhooks/{webhook}/deliveries/{delivery:path}/retry", _retry, "POST"),
    _webhook_route("/v1/webhooks/{webhook}/test", _test, "POST"),
]
