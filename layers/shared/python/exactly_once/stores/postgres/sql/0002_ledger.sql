-- The examples' effect ledger (one row per executed side effect), written in ctx.transaction
-- so that it commits with the COMPLETED record. Your own business tables come from your own
-- migrations; this one serves the examples, `make run` and the chaos harness.
CREATE TABLE exactly_once.ledger (
    pk             text   NOT NULL,
    sk             text   NOT NULL,
    fence          bigint NOT NULL,
    message_id     text   NOT NULL,
    detail         text   NOT NULL,
    written_at_ms  bigint NOT NULL,
    PRIMARY KEY (pk, sk)
);
