"""The second app's stack (see stack.py)."""
