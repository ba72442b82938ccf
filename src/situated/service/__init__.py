"""The service layer: typed operations and their documents, shared by every door."""

from situated.service.operations import OPERATOR_ROLE, Pool, Service

__all__ = ["OPERATOR_ROLE", "Pool", "Service"]
