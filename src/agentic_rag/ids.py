"""Identifiers for tasks, contexts, messages, artifacts and requests."""

import os


def new_id() -> str:
    """A random (version 4) UUID as 32 hex digits, like `uuid.uuid4().hex` at a quarter of the
    cost: a request makes several, and `uuid.UUID` spends most of its time in int arithmetic."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # RFC 4122 variant
    return raw.hex()
