"""Operator tooling: the local AWS stack, the poller and the CLI (not shipped in the layer)."""
