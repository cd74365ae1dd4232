"""A2A 1.0 (docs/a2a-notes.md §13): the JSON-RPC binding beside 0.2.1 and 0.3 at `POST /`,
as a thin adapter over the one task engine (agentic_rag.tasks). The 1.0 data model is the
a2a-sdk's proto messages (a2a.types.a2a_pb2), written and read by protobuf's JSON mapping;
the engine's records (the 0.2.1 shape) cross over through a2a-sdk's 0.3 conversions."""
