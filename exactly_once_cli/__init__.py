"""The operator CLI, `eonce`: commands only (argument parsing and output); the work is elsewhere."""
