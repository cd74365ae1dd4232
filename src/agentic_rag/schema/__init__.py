"""Wire types: data only, imported by every layer that speaks or stores A2A.

`a2a.py` is generated from `spec/a2a-v0.2.1.schema.json` (scripts/generate_schema.py); `base.py`
is its models' base; `compat.py` holds what peers send beyond 0.2.1. `problems.py` is the other
wire format: RFC 7807 problem details, which the REST routes and the authentication middleware
answer with.
"""
