"""A one-consumer CDK app whose handler imports what only its own layers hold, synthesized in
process: for the tests of how the local stack, `invoke` and `replay` put an app's layers on
the handler's path (as Lambda extracts them into /opt)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_

from exactly_once_cdk import IdempotencyTable, IdempotentConsumer

# The consumer's own layer comes first: a published one (an ARN), which has no code here.
PUBLISHED = "arn:aws:lambda:us-east-1:123456789012:layer:elsewhere:3"
RUNTIME = "{runtime}"  # in a layer file's path: the function's runtime name ("python3.13")


def synthesize(
    root: Path, handler_code: str, layers: Mapping[str, Mapping[str, str]], outdir: Path
) -> None:
    """`root/src/pay.py` holds `handler_code` (handler `pay.handle`); each layer (by construct
    id, in the function's order) is the folder `root/<id>` with its files (relative path ->
    text; `RUNTIME` in a path is the function's runtime name). The assembly goes to `outdir`."""
    (root / "src").mkdir(parents=True)
    (root / "src" / "pay.py").write_text(handler_code)
    app = App(outdir=str(outdir))
    stack = Stack(app, "Shop")
    consumer = IdempotentConsumer(
        stack,
        "Pay",
        code=lambda_.Code.from_asset(str(root / "src")),
        handler="pay.handle",
        table=IdempotencyTable(stack, "Records"),
        layer=lambda_.LayerVersion.from_layer_version_arn(stack, "Published", PUBLISHED),
    )
    for layer_id, files in layers.items():
        for relative, text in files.items():
            path = root / layer_id / relative.replace(RUNTIME, consumer.function.runtime.name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        code = lambda_.Code.from_asset(str(root / layer_id))
        consumer.function.add_layers(lambda_.LayerVersion(stack, layer_id, code=code))
    app.synth()
