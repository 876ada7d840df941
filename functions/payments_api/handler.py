"""POST /payments behind an HTTP API: each Idempotency-Key charges once, for its caller only.

The decorator answers replays, conflicts and mismatched reuse before this code runs; the
ledger entry is the fenced effect, so even a request that outlived its lease and was taken
over cannot write a second one.
"""

from __future__ import annotations

import json
import time
from decimal import Decimal, InvalidOperation
from typing import Any

from exactly_once import HttpRequest, RequestContext, idempotent_api
from exactly_once.ledger import append_effect


def _problem(status: int, title: str, detail: str) -> dict[str, Any]:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    return {
        "statusCode": status,
        "headers": {"content-type": "application/problem+json"},
        "body": json.dumps(body),
    }


@idempotent_api()
def handle(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
    try:
        body = request.json()
    except ValueError:
        return _problem(400, "Body is not JSON", "send a JSON object with accountId and amount")
    if not isinstance(body, dict):
        return _problem(400, "Body is not an object", "send a JSON object")
    account = body.get("accountId")
    if not isinstance(account, str) or not account:
        return _problem(422, "No accountId", "the payment needs an accountId")
    try:
        amount = Decimal(str(body.get("amount")))
    except InvalidOperation:
        return _problem(422, "Bad amount", f"amount is not a number: {body.get('amount')!r}")
    if not amount.is_finite() or amount <= 0:
        return _problem(422, "Bad amount", f"amount must be positive, got {amount}")
    if ctx.attempt <= int(body.get("failTimes", 0)):
        return _problem(503, "Try again", f"simulated transient failure on attempt {ctx.attempt}")
    if work_ms := body.get("workMs"):
        time.sleep(float(work_ms) / 1000)
    entry = append_effect(ctx, {"kind": "payment", "account": account, "amount": str(amount)})
    payment = {
        "paymentId": ctx.request_id,
        "account": account,
        "amount": str(amount),
        "ledgerEntry": entry,
        "fence": ctx.fence,
    }
    return {
        "statusCode": 201,
        "headers": {"content-type": "application/json"},
        "body": json.dumps(payment),
    }
