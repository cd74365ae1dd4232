-- A task's status in a column of its own, written by every commit of its events; `task` (the
-- rest of the snapshot: history, artifacts) only by the commits that change it, as `body_seq`
-- says. A progress event then writes a few hundred bytes, not the whole snapshot again (a
-- task whose message carries a PDF rewrote megabytes a page). Reads lay the status over
-- `task`.
ALTER TABLE tasks ADD COLUMN status jsonb, ADD COLUMN body_seq bigint NOT NULL DEFAULT 0;
UPDATE tasks SET status = task -> 'status', body_seq = last_seq;
ALTER TABLE tasks ALTER COLUMN status SET NOT NULL;
