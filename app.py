#!/usr/bin/env python3
"""CDK entry point (`cdk synth`, `make synth`): settings come from cdk.json and `-c` flags."""

import sys

from exactly_once_cdk.bytecode import InterpreterNotFound
from infra.application import create_app

try:
    app, _ = create_app()
    app.synth()
except InterpreterNotFound as missing:
    # What to install or set, in one line under the CLI's "Subprocess exited with error 1"
    # (and `eonce up`'s reason for a failed deploy), not a traceback through the CDK's frames.
    sys.exit(f"InterpreterNotFound: {missing}")
