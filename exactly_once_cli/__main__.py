"""`python -m exactly_once_cli` runs the same CLI as the `eonce` console script."""

from exactly_once_cli.console import main

main()
