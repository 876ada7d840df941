"""The PostgreSQL store: the same fenced state machine, with business writes committed in the
same transaction as the COMPLETED record (`ctx.transaction`).

Imported only when a DSN selects it (stores/protocol.py `open_store`), so psycopg never loads on the
DynamoDB path. The schema comes from the shipped migrations (migrations.py), never at import.
"""
