"""`python -m tools` runs the operator CLI."""

from tools.cli import main

main()
