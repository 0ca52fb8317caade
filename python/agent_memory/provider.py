"""Building blocks for a store written in Python: the core's own checks and cursors.

A store that uses these enforces exactly the limits and cursor rules of every provider of the
package (one validation module, in Rust), instead of a copy of them:

| step | use |
| --- | --- |
| check a ``put`` before any I/O | ``check_put(key, content, metadata=…, expires_at=…, expected_revision=…, create_only=…, source=…, now=store_clock_now)`` |
| check a key, a query, the ids of ``delete_user`` / ``list_namespaces`` | ``check_key``, ``check_query(query, match=…)``, ``check_user`` |
| match a ``search`` | ``search_words(query, match=…, ignore_case=…)`` checks the query and returns what the content must contain: the phrase, or the words (``"all_words"``: every one; ``"any_word"``: one); with ``ignore_case`` they are folded, so look for them in ``fold_case(content)`` |
| fold case as ``ignore_case`` does | ``fold_case(text)``: Unicode *simple* case folding, one character to one; not ``str.lower()`` (keeps the Kelvin sign and ``ς``) nor ``str.casefold()`` (turns ``ß`` into ``ss``) |
| check ``limit``, ``after``, ``prefix`` and the search options of ``list`` / ``list_keys`` / ``search`` / ``purge_expired`` | ``key_page(kind, scope, limit, after, prefix="", match=…, ignore_case=…, metadata=…)`` returns the key to continue after (``kind``: ``"list"``, ``"keys"`` for ``list_keys``, ``"search"``, ``"purge"``; a prefix is for ``"list"`` and ``"keys"`` only, ``match`` and ``ignore_case`` for ``"search"``, a metadata filter for ``"list"`` and ``"search"``); the page holds the keys above it that start with ``prefix`` |
| the ``next_cursor`` of such a page | ``key_cursor(kind, scope, last_key, prefix="", match=…, ignore_case=…, metadata=…)`` (the prefix and the options bind the cursor to that listing or search) |
| the same for ``list_namespaces`` | ``namespace_page(application_id, user_id, limit, after)``, ``namespace_cursor(application_id, user_id, last_namespace)`` (``""`` is the default namespace) |
| the same for ``list_users`` | ``user_page(application_id, limit, after)``, ``user_cursor(application_id, last_user_id)`` |
| the same for ``list_applications`` | ``application_page(limit, after)``, ``application_cursor(last_application_id)`` |

Each raises ``MemoryValidationError`` naming the field, with the core's message. Then run
``agent_memory.testing.MemoryStoreConformanceMixin`` against the store.

A metadata filter (``metadata=`` of ``list`` and ``search``, a dict of field names to ``str``,
``int``, ``float``, ``bool`` or ``None``) holds when every field is present in the record's
metadata with an equal value: numbers by value (``1`` equals ``1.0``; ``True`` is not ``1``),
strings, booleans and ``None`` exactly. ``key_page`` checks the filter (at most
``MAX_METADATA_FILTER_FIELDS`` fields, scalar values).

The cursor helpers are the easy path, not a requirement: a store may return cursor strings of
its own (1 to ``MAX_CURSOR_BYTES`` printable ASCII characters), which the package carries
unread; it then checks ``limit`` and ``prefix`` with the page helpers and ``after=None``, and
refuses every cursor it did not make for the same operation, scope, prefix, match mode, case
and metadata filter with ``MemoryValidationError`` naming ``cursor``.
"""

from ._native import (
    MAX_CONTENT_BYTES,
    MAX_CURSOR_BYTES,
    MAX_ID_BYTES,
    MAX_KEY_BYTES,
    MAX_METADATA_DEPTH,
    MAX_METADATA_SOURCE_BYTES,
    MAX_METADATA_FILTER_FIELDS,
    MAX_PAGE_LIMIT,
    MAX_QUERY_WORDS,
    application_cursor,
    application_page,
    check_key,
    check_put,
    check_query,
    check_user,
    fold_case,
    key_cursor,
    key_page,
    namespace_cursor,
    namespace_page,
    search_words,
    user_cursor,
    user_page,
)

__all__ = [
    "MAX_CONTENT_BYTES",
    "MAX_CURSOR_BYTES",
    "MAX_ID_BYTES",
    "MAX_KEY_BYTES",
    "MAX_METADATA_DEPTH",
    "MAX_METADATA_SOURCE_BYTES",
    "MAX_METADATA_FILTER_FIELDS",
    "MAX_PAGE_LIMIT",
    "MAX_QUERY_WORDS",
    "application_cursor",
    "application_page",
    "check_key",
    "check_put",
    "check_query",
    "check_user",
    "fold_case",
    "key_cursor",
    "key_page",
    "namespace_cursor",
    "namespace_page",
    "search_words",
    "user_cursor",
    "user_page",
]
