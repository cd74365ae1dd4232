-- Several workers on one database: the worker that runs (or will run) each unfinished task.
-- A worker is alive while it holds its advisory lock (see agentic_rag/a2a/cluster.py); the
-- unfinished tasks of a worker that holds none are recovered by another.
ALTER TABLE tasks ADD COLUMN worker integer;
