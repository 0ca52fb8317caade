"""A pure-Python store with cursors of its own, instead of the core's.

``SignedCursorStore`` keeps its records like ``DictStore`` but makes and judges its own
opaque cursor strings, as a store over a datastore with native paging tokens would: the core
carries them unread, and the store alone decides whether one is its own, for the same
operation, scope and prefix. The conformance mixin passes against it, which shows that
nothing in the core or the suite depends on the core's cursor format.

A cursor is ``sc1.<operation>.<position>.<signature>``: the position (a key, namespace, user
id or application id) as unpadded base64url, and the first 16 bytes of an HMAC-SHA256, under a
key of this store instance, over the operation, what the page is over (the scope, the user or
the application), the ``list`` prefix and the search options (match mode, case, metadata
filter). So a cursor of another operation, scope, prefix, option or store, a garbled one and
one of the core's format are all refused as ``MemoryValidationError`` naming ``cursor``.
Limits, prefixes and options are still checked with ``agent_memory.provider``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from typing import Optional

from agent_memory import MemoryValidationError
from agent_memory.provider import application_page, key_page, namespace_page, user_page

from reference_store import DictStore

_OPERATIONS = {
    "list": "l",
    "keys": "k",
    "search": "s",
    "purge": "p",
    "namespaces": "n",
    "users": "u",
    "applications": "a",
}


def _refuse(reason: str) -> MemoryValidationError:
    error = MemoryValidationError(f"invalid cursor: {reason}")
    error.field = "cursor"
    error.reason = reason
    return error


def _binding(kind: str, over, prefix: str, options: Optional[dict]) -> bytes:
    """What a cursor is for, as bytes no two different page requests share (and two requests
    for the same records do: a filter's ``1`` and ``1.0`` are one number)."""
    if kind in ("list", "keys", "search", "purge"):
        parts = [over.application_id, over.user_id, over.namespace]
    elif kind == "namespaces":
        parts = list(over)
    elif kind == "users":
        parts = [over]
    else:
        parts = []
    options = dict(options or {})
    if options.get("metadata"):
        options["metadata"] = {name: _canonical(value) for name, value in options["metadata"].items()}
    return json.dumps([kind, parts, prefix, options], sort_keys=True).encode()


def _canonical(value):
    """A filter value in one spelling: a whole float as the integer it equals."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class SignedCursorStore(DictStore):
    """``DictStore`` with signed cursors of its own format."""

    def __init__(self, clock=None) -> None:
        super().__init__(clock)
        self._cursor_key = secrets.token_bytes(32)

    def _sign(self, kind: str, over, prefix: str, options, position: bytes) -> str:
        message = _binding(kind, over, prefix, options) + b"\0" + position
        return hmac.new(self._cursor_key, message, hashlib.sha256).hexdigest()[:32]

    def _cursor(self, kind: str, over, position: str, prefix: str = "", options=None) -> str:
        raw = position.encode()
        encoded = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        signature = self._sign(kind, over, prefix, options, raw)
        return f"sc1.{_OPERATIONS[kind]}.{encoded}.{signature}"

    def _start(
        self, kind: str, over, limit: int, after: Optional[str], prefix: str = "", options=None
    ):
        # The provider helpers check the limit, the prefix, the search options and the ids;
        # the cursor is ours.
        if kind == "namespaces":
            namespace_page(*over, limit, None)
        elif kind == "users":
            user_page(over, limit, None)
        elif kind == "applications":
            application_page(limit, None)
        else:
            key_page(kind, over, limit, None, prefix, **(options or {}))
        if after is None:
            return None
        parts = after.split(".")
        if len(parts) != 4 or parts[0] != "sc1":
            raise _refuse("is not a cursor of this store")
        if parts[1] != _OPERATIONS[kind]:
            raise _refuse("belongs to another operation")
        try:
            raw = base64.urlsafe_b64decode(parts[2] + "=" * (-len(parts[2]) % 4))
        except (binascii.Error, ValueError):
            raise _refuse("is not a cursor of this store") from None
        if not hmac.compare_digest(parts[3], self._sign(kind, over, prefix, options, raw)):
            raise _refuse("belongs to another scope, prefix, search option or store")
        # Signed by this store, so the position is one it wrote: valid UTF-8.
        return raw.decode()
