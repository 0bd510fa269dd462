"""Help as git and kcat print it, the old spellings, and shell completion for bash, zsh and fish."""

from __future__ import annotations

import re

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from rmqtool.cli.main import app
from tests.conftest import run_rmqtool

COMMANDS = sorted(get_command(app).commands)
runner = CliRunner()


def _help(*args: str) -> str:
    r = runner.invoke(app, [*args, "--help"], prog_name="rmqtool")
    assert r.exit_code == 0, r.output
    return r.output


@pytest.mark.parametrize("command", COMMANDS)
def test_help_has_no_type_tags_braces_or_prose_defaults(command):
    text = _help(command)
    assert not re.search(r"<(bool|str|int|float|path|list\[str\])>", text), text
    usage = text.splitlines()[0]
    assert usage.startswith(f"Usage: rmqtool {command} [OPTIONS]") and "{" not in usage, usage
    assert not re.search(r"\((default|default:) [^)]*\)", text), "defaults are shown as [default: ...]"
    assert "--limit" not in text and "--namesrv-addr" not in text  # hidden aliases


def test_usage_lines_name_arguments_in_capitals():
    assert _help("send").splitlines()[0] == "Usage: rmqtool send [OPTIONS] TOPIC [BODY]"
    assert _help("inspect").splitlines()[0] == "Usage: rmqtool inspect [OPTIONS] KIND [PATH]"
    assert _help("verify").splitlines()[0] == "Usage: rmqtool verify [OPTIONS] [STORE]"


def test_defaults_are_shown_one_way():
    text = " ".join(_help("send").split())
    assert "[default: rmqtool_producer]" in text and "[default: 1]" in text
    text = " ".join(_help("consume").split())
    assert "[default: rmqtool]" in text and "[env var: RMQ_STORE; default: ~/store]" in text


def test_command_summaries_are_whole_sentences():
    listing = _help().split("Commands:", 1)[1]
    assert "..." not in listing, listing
    summaries: dict[str, str] = {}
    for line in listing.strip("\n").splitlines():
        m = re.match(r"  (\S+)\s+(.*)", line)
        if m and m.group(1) in COMMANDS:
            name = m.group(1)
            summaries[name] = m.group(2)
        else:  # a wrapped summary goes on
            summaries[name] += " " + line.strip()
    assert sorted(summaries) == sorted(n for n in COMMANDS if not get_command(app).commands[n].hidden)
    for name, text in summaries.items():
        assert text.endswith("."), (name, text)


def test_a_long_summary_is_wrapped_not_cut():
    from rmqtool.cli.helpfmt import RmqGroup

    group = get_command(app)
    assert isinstance(group, RmqGroup)
    cmd = group.commands["verify"]
    saved = cmd.help
    cmd.help = "Check a store as a broker's recovery would, and a good deal more than that, at great length."
    try:
        import typer._click as click

        ctx = click.Context(group, info_name="rmqtool")
        fmt = ctx.make_formatter()
        group.format_commands(ctx, fmt)
        text = " ".join(fmt.getvalue().split())
    finally:
        cmd.help = saved
    assert "a good deal more than that, at great length." in text and "..." not in text


def test_consume_help_says_no_commit_writes_nothing():
    text = " ".join(_help("consume").split())
    assert "--no-commit, --read-only" in text and "create or change no file" in text


def test_old_spellings_still_work(tmp_path):
    store = tmp_path / "s"
    r = run_rmqtool("send", "--store", str(store), "Old", "a", input="")
    assert r.returncode == 0, r.stderr
    r = run_rmqtool("inspect", "commitlog", str(store), "--limit", "1", "--json", input="")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 1, r.stderr
    r = run_rmqtool("consume", "Old", "--store", str(store), "--from", "first", "--limit", "1", "--json", input="")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 1, r.stderr


@pytest.mark.parametrize("shell,marker", [("bash", "complete -o default -F _rmqtool_completion rmqtool"),
                                          ("zsh", "#compdef rmqtool"), ("fish", "complete --command rmqtool")])
def test_completion_scripts_generate(shell, marker):
    r = run_rmqtool("--show-completion", shell, input="", env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert r.returncode == 0, r.stderr
    assert marker in r.stdout, r.stdout


def test_completion_completes_commands_and_options():
    r = run_rmqtool(input="", env={"_RMQTOOL_COMPLETE": "complete_bash", "COMP_WORDS": "rmqtool cons",
                                   "COMP_CWORD": "1"})
    assert r.stdout.split() == ["consume"], r.stdout
    r = run_rmqtool(input="", env={"_RMQTOOL_COMPLETE": "complete_bash", "COMP_WORDS": "rmqtool consume --dead",
                                   "COMP_CWORD": "2"})
    assert r.stdout.split() == ["--deadline"], r.stdout
    r = run_rmqtool(input="", env={"_RMQTOOL_COMPLETE": "complete_bash", "COMP_WORDS": "rmqtool inspect --li",
                                   "COMP_CWORD": "2"})
    assert r.returncode == 0 and r.stdout.split() == [], r.stdout  # --limit is an old spelling: not offered
    r = run_rmqtool(input="", env={"_RMQTOOL_COMPLETE": "complete_bash", "COMP_WORDS": "rmqtool inspect --cou",
                                   "COMP_CWORD": "2"})
    assert r.stdout.split() == ["--count"], r.stdout


def test_man_command_writes_the_page_s_roff():
    r = run_rmqtool("man", "consume", input="")
    assert r.returncode == 0 and r.stdout.startswith(".TH RMQTOOL-CONSUME 1"), r.stderr
    assert "\\-\\-deadline" in r.stdout
    r = run_rmqtool("man", "nope", input="")
    assert r.returncode == 2 and "consume" in r.stderr


def test_man_page_summaries_are_not_cut():
    from rmqtool.cli.manpage import pages

    for text in pages().values():
        name_line = text.split(".SH NAME\n", 1)[1].split("\n", 1)[0]
        last = name_line.split()[-1]
        assert "..." not in name_line and last[-1] not in ",:;" and last not in ("and", "or", "the", "of"), name_line
    main = pages()["rmqtool.1"].split(".SH COMMANDS\n", 1)[1].split(".SH ", 1)[0]
    assert "..." not in main and "Repair a store: cut torn tails, rebuild what is derived." in main
