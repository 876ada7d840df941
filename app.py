#!/usr/bin/env python3
"""CDK entry point (`cdk synth`, `make synth`): settings come from cdk.json and `-c` flags."""

from infra.application import create_app

app, _ = create_app()
app.synth()
