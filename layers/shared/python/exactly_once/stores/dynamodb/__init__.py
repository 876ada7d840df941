"""The DynamoDB store: conditional writes on one table, fenced by a lock token and a fence
counter, with the caller's clock checked against DynamoDB's (`clock_skew`)."""
