"""Write the man pages: `python man/generate.py [OUTDIR]` (default: man/, the committed pages).

The pages are made by rmqtool/cli/manpage.py from the Typer app (so `rmqtool man CMD` shows
the same text); tests/inspect/test_man.py fails when the committed ones are stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rmqtool.cli.manpage import generate  # noqa: E402

if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
    for p in generate(out):
        print(p.name, file=sys.stderr)
