"""What the tests share; a test module imports from here, never from another test module.

- servers and clients: live (the app in a thread or a process), rpc (JSON-RPC and SSE), mcp,
  cli, peers/ (agent networks), network;
- databases and credentials: databases, security;
- doubles of the services these machines cannot reach: hosted_chat (a hosted LLM's chat API),
  embeddings_double (a hosted embeddings API);
- sample inputs: pdf_samples, ocr_pages;
- each test package's helpers: graph, knowledge, tasks, workers, push, embedded, outcomes.
"""
