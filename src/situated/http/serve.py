"""The app `situated serve` runs in each uvicorn worker process, configured by environment
variables the command sets (a worker is a fresh process: it opens its own `Memory`s)."""

from __future__ import annotations

import os

from fastapi import FastAPI

from situated.http.app import create_app
from situated.memory import Memory
from situated.service import Pool, Service


def app_from_env() -> FastAPI:
    path = os.environ["SITUATED_SERVE_DB"]
    embedder = os.environ.get("SITUATED_SERVE_EMBEDDER", "minilm-static")
    pool = Pool(lambda: Memory(path, embedder=embedder),
                int(os.environ.get("SITUATED_SERVE_POOL", "2")))
    service = Service(pool, inferred_feedback=os.environ.get("SITUATED_SERVE_INFERRED") != "0")
    return create_app(service, mcp=os.environ.get("SITUATED_SERVE_MCP", "1") == "1",
                      host=os.environ.get("SITUATED_SERVE_HOST", "127.0.0.1"),
                      mcp_stateless=os.environ.get("SITUATED_SERVE_WORKERS", "1") != "1")
