"""The embedded local AWS for `make run` and the tests: moto, DynamoDB Local, deploy, poller."""
