-- The groups of tools an API key selects (skills/groups.py); NULL: no selection, every group
-- the deployment offers.
ALTER TABLE api_keys ADD COLUMN groups text[];
