"""`rmqtool man [COMMAND]`: the manual page, also where `man rmqtool-COMMAND` finds nothing.

The pages are installed with the package (share/man/man1, so `man rmqtool-consume` works once
the environment's bin/ is on PATH); this command is the fallback for installs whose man path
does not include them (an editable install, a system without man-db's PATH mapping). It makes
the page from the running code, so it is never stale. On a terminal it shows the page with
man(1) when there is one; otherwise it writes the roff source to stdout (`| man -l -`).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from typing import Annotated

import typer

from rmqtool.cli import common
from rmqtool.errors import InvalidInput


def man(
    command: Annotated[str | None, typer.Argument(metavar="COMMAND", help="The command whose page to show.")] = None,
    roff: Annotated[bool, typer.Option("--roff", help="Write the roff source, also on a terminal.")] = False,
) -> None:
    """Show the manual page of rmqtool or of one command.

    Writes the roff source when stdout is not a terminal (or with --roff): `rmqtool man consume
    | man -l -`.
    """
    from rmqtool.cli.manpage import pages

    all_pages = pages()
    name = "rmqtool.1" if command is None else f"rmqtool-{command}.1"
    if name not in all_pages:
        known = ", ".join(sorted(p[len("rmqtool-"):-2] for p in all_pages if p != "rmqtool.1"))
        raise InvalidInput(f"no manual page for {command!r}; commands: {known}")
    text = all_pages[name]
    viewer = shutil.which("man")
    if roff or not common.is_tty() or viewer is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    rc = subprocess.run([viewer, "-l", "-"], input=text.encode("utf-8")).returncode
    if rc != 0:
        raise typer.Exit(3)


def register(app: typer.Typer) -> None:
    app.command("man")(man)
