"""The queue consumer's room: an SQS batch in (`consumer`, `batch`), each record read once
(`messages`, `envelopes`, `keys`), run under the lock (`processor`, `record_entry`) and, when it
cannot succeed, sent to the dead-letter queue with its reason (`dead_letter`).

The SNS subscriber (`exactly_once.sns`) runs its notifications through the same record path.
"""
