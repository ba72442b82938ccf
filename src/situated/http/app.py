"""The HTTP API: a thin FastAPI shell over `situated.service`.

Every route needs `Authorization: Bearer <key>`; the key alone names the principal (no request
field can name a tenant, roles or clearance: request bodies forbid unknown fields). Routes are
plain functions, run in FastAPI's thread pool, each one `Service` call. The MCP server is
mounted at `/mcp` (streamable HTTP) behind the same keys. OpenAPI at `/openapi.json`, the docs
page at `/docs`. The dashboard for people (`situated.dashboard`) is served at `/`: a browser
session from a key, CSRF on every form.
"""


import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Annotated, Any

from situated.extras import missing_extra

try:  # the extra that provides it, named in one line when it is missing
    import anyio
    from fastapi import Depends, FastAPI, Header, Path, Query, Request
    from fastapi.responses import Response, StreamingResponse
    from fastapi.routing import APIRoute
    from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
except ModuleNotFoundError as exc:
    raise missing_extra(exc, __name__) or exc from None
from pydantic import BaseModel

from situated import arguments as args
from situated.http.errors import ERROR_RESPONSES, Unauthenticated, install
from situated.http.limits import MAX_BODY_BYTES, BodyLimit, DoorLimits, HeadLimit, KeyGuard
from situated.http.sessions import McpLimits
from situated.models import Principal
from situated.service import Service
from situated.service.models import (
    AddManyRequest,
    AddRequest,
    BriefingDoc,
    ConversationDoc,
    ConversationRequest,
    ErasedDoc,
    EraseRequest,
    EventDoc,
    FeedbackDoc,
    FeedbackRequest,
    GatedDoc,
    HealthDoc,
    LearnRequest,
    ListQuery,
    MaintenanceDoc,
    MemoryDoc,
    PendingDoc,
    RecallRequest,
    RejectDecision,
    ReviewDecision,
    RevokedDoc,
    RevokeRequest,
    StateName,
    StatsDoc,
)

SESSION_HEADER = "X-Situated-Session"
_bearer = HTTPBearer(auto_error=False, description="An API key: `situated keys create`.")

MemoryId = Annotated[str, Path(description="A memory id (`mem_...`).", max_length=64)]
Session = Annotated[
    str | None,
    Header(alias=SESSION_HEADER, max_length=200,
           description="Names a session for inferred feedback (optional)."),
]


def create_app(
    service: Service, *, mcp: bool = True, max_body: int = MAX_BODY_BYTES,
    host: str = "127.0.0.1", mcp_stateless: bool = False, dashboard: bool = True,
    mcp_limits: McpLimits | None = None, limits: DoorLimits | None = None,
) -> FastAPI:
    """The ASGI app over `service` (`mcp`: mount the MCP server at `/mcp`; `host`: the
    address served, for the MCP transport's DNS-rebinding protection; `mcp_stateless`: MCP
    without sessions, as several worker processes need; `dashboard`: the pages for people
    at `/`, `situated.dashboard`; `mcp_limits`: the bounds of MCP sessions; `limits`: the
    bounds of a request's head, `DoorLimits`)."""
    mcp_server = guard = None
    if mcp:
        from situated.mcp_server import build_server, http_handler, http_principal

        bounds = mcp_limits or McpLimits()
        mcp_server = build_server(service, http_principal(service))
        guard = KeyGuard(http_handler(mcp_server, host, mcp_stateless, bounds.idle,
                                      bounds.table), service, bounds, mcp_stateless)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if mcp_server is None or guard is None:
            yield
            return
        async with mcp_server.session_manager.run(), anyio.create_task_group() as tasks:
            tasks.start_soon(guard.sweep)
            yield
            tasks.cancel_scope.cancel()

    app = FastAPI(
        title="situated",
        summary="Experience memory for LLM agents, compiled at recall.",
        version="0.1.0",
        lifespan=lifespan,
        responses=ERROR_RESPONSES,
        docs_url=None, redoc_url=None,  # served from the package (`situated.http.docs`)
        dependencies=[Depends(known_query)],
    )
    install(app)
    from situated.http import docs

    docs.mount(app)

    async def principal(
        creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Principal:
        # inline, not in a worker thread: one indexed read on the service's own key store
        if creds is None:
            raise Unauthenticated("an API key is required: Authorization: Bearer <key>")
        who = service.principal_for(creds.credentials)
        if who is None:
            raise Unauthenticated("unknown or revoked API key")
        return who

    Who = Annotated[Principal, Depends(principal)]

    @app.post("/v1/memories", tags=["write"], summary="Propose a memory", response_model=GatedDoc)
    def add(who: Who, req: AddRequest, session: Session = None) -> Response:
        return _send(service.add(who, req, session))

    @app.post("/v1/memories/batch", tags=["write"], summary="Propose many memories",
        response_model=list[GatedDoc])
    def add_many(who: Who, req: AddManyRequest) -> Response:
        return _send(service.add_many(who, req))

    @app.post("/v1/learn", tags=["write"], summary="Distil a trajectory into lessons",
        response_model=list[GatedDoc])
    def learn(who: Who, req: LearnRequest) -> Response:
        return _send(service.learn(who, req))

    @app.post("/v1/conversations", tags=["write"], response_model=ConversationDoc,
        summary="Store chat turns as notes; extract facts and preferences")
    def add_conversation(who: Who, req: ConversationRequest) -> Response:
        return _send(service.add_conversation(who, req))

    @app.post("/v1/recall", tags=["recall"], summary="Compile guidance for the present state",
        response_model=BriefingDoc)
    def recall(who: Who, req: RecallRequest, session: Session = None) -> Response:
        return _send(service.recall(who, req, session, feedback_call))

    @app.post("/v1/feedback", tags=["recall"], summary="Report how a recalled task went",
        response_model=FeedbackDoc)
    def feedback(who: Who, req: FeedbackRequest) -> Response:
        return _send(service.feedback(who, req))

    @app.get("/v1/memories", tags=["read"], summary="Memories this key may read",
        response_model=list[MemoryDoc])
    def list_(
        who: Who,
        namespace: Annotated[str | None, Query(max_length=200)] = None,
        state: Annotated[list[StateName] | None, Query(max_length=8)] = None,
        limit: Annotated[int, Query()] = 100,
        offset: Annotated[int, Query()] = 0,
    ) -> Response:
        states = None if state is None else [str(x) for x in state]
        q = ListQuery(namespace=namespace, states=states, limit=limit, offset=offset)
        return _send(service.list(who, q))

    @app.get("/v1/memories/{memory_id}", tags=["read"], summary="One memory",
        response_model=MemoryDoc)
    def inspect(
        who: Who, memory_id: MemoryId,
        as_of: Annotated[datetime | float | None, Query()] = None,
        known_at: Annotated[datetime | float | None, Query()] = None,
    ) -> Response:
        return _send(service.inspect(who, memory_id, as_of, known_at))

    @app.get("/v1/memories/{memory_id}/history", tags=["read"], summary="A memory's events",
        response_model=list[EventDoc])
    def history(who: Who, memory_id: MemoryId) -> Response:
        return _send(service.history(who, memory_id))

    @app.get("/v1/ledger", tags=["read"], summary="Recent ledger events, newest first",
        response_model=list[EventDoc])
    def ledger(who: Who, limit: int = 100, offset: int = 0) -> Response:
        return _send(service.ledger(who, limit, offset))

    @app.get(
        "/v1/export", tags=["read"], summary="Every memory this key may read (JSON lines)",
        response_class=StreamingResponse,
        responses={200: {"content": {"application/x-ndjson": {
            "schema": {"$ref": "#/components/schemas/MemoryDoc"}}}}},
    )
    def export(
        who: Who, namespace: Annotated[str | None, Query(max_length=200)] = None
    ) -> StreamingResponse:
        docs = service.export(who, namespace)  # arguments checked here, before streaming

        def lines() -> Iterator[bytes]:
            for doc in docs:
                yield (doc.model_dump_json() + "\n").encode()

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    @app.get("/v1/stats", tags=["read"], summary="Counts of what this key may see",
        response_model=StatsDoc)
    def stats(who: Who) -> Response:
        return _send(service.stats(who))

    @app.get("/v1/review/pending", tags=["review"], summary="Proposals held for review",
        response_model=list[PendingDoc])
    def pending(
        who: Who, namespace: Annotated[str | None, Query(max_length=200)] = None
    ) -> Response:
        return _send(service.pending(who, namespace))

    @app.post("/v1/review/{memory_id}/promote", tags=["review"], summary="Approve a proposal",
        response_model=MemoryDoc)
    def promote(who: Who, memory_id: MemoryId, req: ReviewDecision | None = None) -> Response:
        return _send(service.promote(who, memory_id, (req or ReviewDecision()).reason))

    @app.post("/v1/review/{memory_id}/reject", tags=["review"], summary="Reject a proposal",
        response_model=MemoryDoc)
    def reject(who: Who, memory_id: MemoryId, req: RejectDecision) -> Response:
        return _send(service.reject(who, memory_id, req.reason))

    @app.post("/v1/consents/revoke", tags=["governance"], summary="Withdraw a consent",
        response_model=RevokedDoc)
    def revoke(who: Who, req: RevokeRequest) -> Response:
        return _send(service.revoke(who, req))

    @app.post("/v1/memories/{memory_id}/erase", tags=["governance"], summary="Erase a memory",
        response_model=ErasedDoc)
    def erase(who: Who, memory_id: MemoryId, req: EraseRequest) -> Response:
        return _send(service.erase(who, memory_id, req.reason))

    @app.get("/v1/health", tags=["operations"], summary="The store's health (operator keys)",
        response_model=HealthDoc)
    def health(who: Who) -> Response:
        return _send(service.health(who))

    @app.post("/v1/maintain", tags=["operations"], summary="Run maintenance (operator keys)",
        response_model=MaintenanceDoc)
    def maintain(who: Who) -> Response:
        return _send(service.maintain(who))

    if dashboard:
        from situated.dashboard import mount

        mount(app, service)
    if guard is not None:
        from starlette.routing import Route

        app.router.routes.append(Route("/mcp", guard, include_in_schema=False))
    app.add_middleware(BodyLimit, limit=max_body)
    door = limits or DoorLimits()
    app.add_middleware(HeadLimit, fields=door.head_fields, size=door.head_bytes)
    return app


def known_query(request: Request) -> None:
    """Refuse a query parameter an API route does not take (FastAPI drops it): 400 naming it
    and the accepted ones, as for a body's unknown field."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not route.path.startswith("/v1/"):
        return
    accepted, todo = [], [route.dependant]
    while todo:  # the route's own query parameters and those of its dependencies
        dependant = todo.pop()
        accepted += [p.alias for p in dependant.query_params]
        todo += dependant.dependencies
    for name in request.query_params:
        if name not in accepted:
            raise args.unknown_argument(name, accepted)


def feedback_call(recall_id: str, served: list[str]) -> str:
    """The feedback request for a recall, as the rendered briefing spells it."""
    body = json.dumps({"recall_id": recall_id, "success": True, "used": served})
    return (f"POST /v1/feedback {body} (success false if the task failed; keep in used only "
            "the ids you acted on)")


def _send(doc: BaseModel | list[Any]) -> Response:
    """The document as JSON, serialised once by pydantic (FastAPI's own pass would validate
    the response model a second time; `response_model` still documents it)."""
    if isinstance(doc, list):
        body = b"[" + b",".join(d.model_dump_json().encode() for d in doc) + b"]"
    else:
        body = doc.model_dump_json().encode()
    return Response(body, media_type="application/json")
