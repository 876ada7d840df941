"""Operate a deployed stack: find its queues, send messages, replay dead letters (no CLI code)."""
