"""Operations: structured logs with request ids, Prometheus metrics (served, with the probes,
by agentic_rag/health.py).

- `logging`: the log configuration (JSON or text) shared with uvicorn, the request-id context.
- `metrics`: the per-app metrics and the hooks the rest of the code calls with plain names
  (`record_skill_call`, `record_rate_limited`, `record_task_state`).
- `middleware`: the ASGI middleware that gives every request an id and counts it.
"""
