-- No query reads tasks by context; the index only cost every task write.
DROP INDEX IF EXISTS tasks_by_context;
