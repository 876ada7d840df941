"""The queue consumer's room: an SQS batch in (`consumer`), in waves whose keys are claimed in
one request and whose outcomes are written in one more (`waves`, `gathering`, `recent_keys`), as
chains (`batch`), each record read once (`messages`, `envelopes`, `keys`), run under the lock
(`processor`, `record_entry`) and, when it cannot succeed, hidden, retried or sent to the
dead-letter queue with its reason (`reports`, `dead_letter`).

The SNS subscriber (`exactly_once.sns`) runs its notifications through the same record path.
"""
