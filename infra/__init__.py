"""The CDK app: queues, dead-letter queues, the idempotency table, the layer, consumers, alarms."""
