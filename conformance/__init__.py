"""A2A v0.2.1 black-box conformance suite (run: pytest conformance)."""
