"""The optional LLM: an OpenAI-compatible endpoint, or a local model run in this process.

Every client of the LLM (answers and the `llm` reranker, the orchestrator's planning, the
graph's extraction) is given one `ChatEndpoint` (endpoint.py) and speaks the OpenAI chat API to
it. The local model (local.py, the `local-llm` extra) answers that API in process, through an
httpx transport, so that nothing about it leaks into those clients.
"""
