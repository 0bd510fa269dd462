"""`python -m rmqtool` is the same as the `rmqtool` console script."""

from rmqtool.cli.main import main

main()
