"""Generate the man pages from the Typer app: `python man/generate.py [OUTDIR]` (default: man/).

Walks the click command tree of `rmqtool.cli.main.app`: rmqtool(1) plus one page per command
(`rmqtool-<command>.1`) with NAME, SYNOPSIS, DESCRIPTION, OPTIONS, EXAMPLES, EXIT STATUS,
ENVIRONMENT and SEE ALSO. Examples and exit-status notes come from the dicts below (a command
without an entry gets a generic one), so whatever commands exist are covered. The output is
deterministic (no dates), and tests/inspect/test_man.py fails when the committed pages differ.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

try:  # typer >= 0.20 vendors click as typer._click
    from typer._click import core as click
except ImportError:  # pragma: no cover - older typer uses click itself
    import click  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rmqtool import __version__  # noqa: E402
from rmqtool.cli.main import app  # noqa: E402

EXAMPLES: dict[str, list[tuple[str, str]]] = {
    "serve": [("Run a name server and a broker on the default ports over ~/store:", "rmqtool serve"),
              ("Use a broker.conf and another store:", "rmqtool serve -c broker.conf --store /data/store"),
              ("Without the 5.x gRPC endpoint (on 8081 by default):", "rmqtool serve --grpc-port -1")],
    "send": [("Send one message with a tag and a key:", "rmqtool send TopicTest 'hello' --tag TagA --key order-1"),
             ("Send one message per stdin line, 32 per batch:", "seq 1000 | rmqtool send TopicTest --batch 32"),
             ("Deliver in 90 seconds (a timer message):", "rmqtool send TopicTest 'later' --delay 90s")],
    "consume": [("Print what group g has not consumed yet and commit:", "rmqtool consume TopicTest --group g"),
                ("Follow new messages with tag TagA or TagB:", "rmqtool consume TopicTest --expr 'TagA || TagB' --follow")],
    "replay": [("Show what re-sending the dead letters of group g would do:", "rmqtool replay --dlq g --dry-run")],
    "inspect": [("Summary of a store: queues, offsets, checkpoints, delay progress, consumer lag:",
                 "rmqtool inspect store ~/store"),
                ("Messages of one topic queue as JSON Lines:",
                 "rmqtool inspect commitlog ~/store/commitlog --topic TopicTest --queue 0 --json"),
                ("One message by its offset msgId, bytes and field tree:",
                 "rmqtool inspect commitlog ~/store --msg-id C0A8010A00002A9F0000000000000000 --format hex"),
                ("ConsumeQueue units with the messages they point at:",
                 "rmqtool inspect consumequeue ~/store/consumequeue/TopicTest/0 --follow-links"),
                ("BatchConsumeQueue units of a BatchCQ topic (msgBaseOffset, batchSize):",
                 "rmqtool inspect batchconsumequeue ~/store --topic BatchTopic"),
                ("ConsumeQueueExt units (enableConsumeQueueExt=true), bytes and field tree:",
                 "rmqtool inspect consumequeue_ext ~/store/consumequeue_ext/TopicTest/0 --format hex"),
                ("Timer wheel slots with their TimerLog chains:", "rmqtool inspect timerwheel ~/store -L"),
                ("Index entries of a key:", "rmqtool inspect index ~/store --topic TopicTest --key order-1")],
    "verify": [("Check a store, one JSON line per problem:", "rmqtool verify ~/store"),
               ("Only the kinds of problems, counted:", "rmqtool verify ~/store | jq -r .kind | sort | uniq -c")],
    "repair": [("Show the plan:", "rmqtool repair ~/store --dry-run"),
               ("Repair a copy of a crashed broker's store:", "rmqtool repair /backup/store")],
}

EXIT_STATUS: dict[str, list[tuple[str, str]]] = {
    "verify": [("0", "the store is clean."), ("1", "problems were found (one JSON line each on standard output)."),
               ("2", "STORE is not a store directory."), ("3", "a file could not be read.")],
    "repair": [("0", "the plan was printed (--dry-run) or carried out."),
               ("2", "STORE is not a store directory."),
               ("3", "the store is locked by a running broker, or a file could not be written.")],
    "send": [("0", "every message was stored (SEND_OK)."), ("1", "a message was not SEND_OK."),
             ("2", "invalid input (topic, delay level, body size); nothing was sent."),
             ("3", "no broker reachable, or the store is locked.")],
}
DEFAULT_EXIT = [("0", "success."), ("1", "the command ran but found problems."),
                ("2", "bad usage or invalid input; nothing was written."),
                ("3", "a runtime failure: I/O error, no broker reachable, store locked.")]


def _is_arg(p) -> bool:
    return getattr(p, "param_type_name", "") == "argument"


def _is_opt(p) -> bool:
    return getattr(p, "param_type_name", "") == "option"


def _metavar(p, ctx) -> str:
    """The value placeholder of an option: its metavar, else its name in capitals (man style)."""
    return getattr(p, "metavar", None) or (p.name or "value").upper()


def esc(text: str) -> str:
    """Escape text for roff: backslashes, leading dots/quotes, hyphens in options."""
    text = text.replace("\\", "\\e")
    lines = []
    for line in text.splitlines():
        if line.startswith((".", "'")):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)


def opt_name(text: str) -> str:
    return text.replace("-", "\\-")


def paragraphs(text: str) -> str:
    """Docstring paragraphs as roff .PP blocks (blank lines separate paragraphs)."""
    paras = [" ".join(p.split()) for p in (text or "").strip().split("\n\n") if p.strip()]
    return "\n.PP\n".join(esc(p) for p in paras)


def synopsis(name: str, cmd: click.Command) -> str:
    parts = [f".B {name}"]
    if any(_is_opt(p) for p in cmd.params):
        parts.append("[\\fIOPTIONS\\fR]")
    for p in cmd.params:
        if _is_arg(p):
            meta = (p.name or "ARG").upper()
            parts.append(f"\\fI{meta}\\fR" if p.required else f"[\\fI{meta}\\fR]")
    return "\n".join(parts)


def options(cmd: click.Command, ctx: click.Context) -> str:
    out = []
    for p in cmd.params:
        if _is_arg(p):
            help_text = getattr(p, "help", None) or ""
            out.append(f".TP\n\\fI{(p.name or '').upper()}\\fR\n{esc(' '.join(help_text.split()))}")
    for p in cmd.params:
        if not _is_opt(p) or getattr(p, 'hidden', False):
            continue
        names = ", ".join(f"\\fB{opt_name(o)}\\fR" for o in [*p.opts, *p.secondary_opts])
        if not p.is_flag and not p.count:
            names += f" \\fI{esc(_metavar(p, ctx))}\\fR"
        text = " ".join((p.help or "").split())
        if p.envvar:
            text += f" [env: {p.envvar}]"
        if p.default not in (None, False, "", ()) and not p.is_flag and p.show_default is not False:
            text += f" [default: {p.default}]"
        out.append(f".TP\n{names}\n{esc(text)}")
    out.append(".TP\n\\fB\\-h\\fR, \\fB\\-\\-help\\fR\nShow the help and exit.")
    return "\n".join(out)


def examples(name: str) -> str:
    items = EXAMPLES.get(name) or [(f"Show the options of {name}:", f"rmqtool {name} --help")]
    return "\n".join(f".PP\n{esc(desc)}\n.PP\n.RS 4\n.nf\n{esc(cmd)}\n.fi\n.RE" for desc, cmd in items)


def exit_status(name: str) -> str:
    return "\n".join(f".TP\n.B {code}\n{esc(text)}" for code, text in EXIT_STATUS.get(name, DEFAULT_EXIT))


ENVIRONMENT = (".TP\n.B RMQ_STORE\nThe store directory of the embedded mode (default ~/store).\n"
               ".TP\n.B NAMESRV_ADDR\nThe name server(s) of the network mode, host:port[;host:port].")


def header(title: str) -> str:
    return f'.TH {title} 1 "" "rmqtool {__version__}" "rmqtool manual"\n'


def command_page(name: str, cmd: click.Command, ctx: click.Context, all_names: list[str]) -> str:
    summary = (cmd.short_help or (cmd.help or "").strip().split("\n")[0]).rstrip(".")
    see = ", ".join(f"\\fBrmqtool\\-{n}\\fR(1)" for n in all_names if n != name)
    return (header(f"RMQTOOL-{name.upper()}")
            + f".SH NAME\nrmqtool\\-{name} \\- {esc(summary)}\n"
            + f".SH SYNOPSIS\n{synopsis(f'rmqtool {name}', cmd)}\n"
            + f".SH DESCRIPTION\n{paragraphs(cmd.help or '')}\n"
            + f".SH OPTIONS\n{options(cmd, ctx)}\n"
            + f".SH EXAMPLES\n{examples(name)}\n"
            + f".SH EXIT STATUS\n{exit_status(name)}\n"
            + f".SH ENVIRONMENT\n{ENVIRONMENT}\n"
            + f".SH SEE ALSO\n\\fBrmqtool\\fR(1), {see}\n")


def main_page(group: click.Command, ctx: click.Context, names: list[str]) -> str:
    cmds = "\n".join(
        f".TP\n\\fBrmqtool\\-{n}\\fR(1)\n{esc(group.commands[n].short_help or (group.commands[n].help or '').strip().split(chr(10))[0])}"
        for n in names)
    return (header("RMQTOOL")
            + ".SH NAME\nrmqtool \\- run and dissect Apache RocketMQ 5.x message stores and brokers\n"
            + ".SH SYNOPSIS\n.B rmqtool\n[\\fB\\-\\-version\\fR] [\\fB\\-\\-debug\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]...\n"
            + f".SH DESCRIPTION\n{paragraphs(group.help or '')}\n.PP\nstdout carries data only (tables on a "
              "terminal, JSON Lines otherwise); diagnostics and progress go to stderr. JSON field names are "
              "RocketMQ's own (camelCase).\n"
            + f".SH COMMANDS\n{cmds}\n"
            + f".SH OPTIONS\n{options(group, ctx)}\n"
            + ".SH EXAMPLES\n" + "\n".join(examples(n) for n in names if n in EXAMPLES) + "\n"
            + f".SH EXIT STATUS\n{exit_status('')}\n"
            + f".SH ENVIRONMENT\n{ENVIRONMENT}\n"
            + ".SH SEE ALSO\n" + ", ".join(f"\\fBrmqtool\\-{n}\\fR(1)" for n in names) + "\n")


def generate(outdir: Path) -> list[Path]:
    group = typer.main.get_command(app)
    assert hasattr(group, "commands"), "the app is a group of commands"
    ctx = click.Context(group, info_name="rmqtool")
    names = sorted(group.commands)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for old in outdir.glob("*.1"):
        old.unlink()
    page = outdir / "rmqtool.1"
    page.write_text(main_page(group, ctx, names), encoding="utf-8")
    written.append(page)
    for n in names:
        cmd = group.commands[n]
        sub = click.Context(cmd, info_name=n, parent=ctx)
        page = outdir / f"rmqtool-{n}.1"
        page.write_text(command_page(n, cmd, sub, names), encoding="utf-8")
        written.append(page)
    return written


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
    for p in generate(out):
        print(p.name, file=sys.stderr)
