-- Steps' recovery points (exactly_once.steps): {"<position>": {"name", "result", "fence", "at"}},
-- written by each step in the same transaction as its business writes, fenced on the lock.
-- Kept across takeovers and retries of one generation; a new generation starts without them.
ALTER TABLE exactly_once.records ADD COLUMN steps jsonb;
