"""The SNS subscriber's room: a Lambda subscribed to a topic (`subscriber`), each notification
read as the message the queue consumer reads (`messages`) and run on the same record path
(`exactly_once.sqs`). Loaded on first use: a queue consumer never imports it."""
