"""`python -m situated` runs the CLI."""

from situated.cli import main

main()
