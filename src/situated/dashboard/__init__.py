"""The dashboard for people: server-rendered pages on `situated serve` at `/`."""

from situated.dashboard.routes import Dashboard, mount

__all__ = ["Dashboard", "mount"]
