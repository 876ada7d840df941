-- A holder that outlives one invocation (a durable execution) names itself with `resume_id`: its
-- next invocation resumes an IN_PROGRESS row carrying the same id instead of finding it "in
-- progress" (see PostgresStore.acquire). Every other acquire clears it. `resumed` says what the
-- last acquire did, as `acquired_over` does: RETURNING sees only the new row.
ALTER TABLE exactly_once.records ADD COLUMN resume_id text;
ALTER TABLE exactly_once.records ADD COLUMN resumed boolean NOT NULL DEFAULT false;
