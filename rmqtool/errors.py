"""Errors a user can cause, each carrying the exit status of the CLI contract.

Every layer raises these; only `rmqtool.cli` turns them into one line on stderr and an exit
code, in one place. Exit codes (cli.md): 1 problems found / not SEND_OK, 2 invalid input with
nothing written, 3 runtime failure (I/O, no broker reachable, store locked).
"""

from __future__ import annotations


class RmqError(Exception):
    """Base of every error rmqtool reports to a user without a traceback."""

    exit_code = 3


class InvalidInput(RmqError):
    """The request is invalid; nothing was written."""

    exit_code = 2


class InvalidTopic(InvalidInput):
    pass


class InvalidMessage(InvalidInput):
    """Body empty or too large, properties too long, bad delay level or timer."""


class StoreError(RmqError):
    """The store cannot be opened or written (I/O error, not a directory, ...)."""


class StoreLocked(StoreError):
    """Another process (a broker or another rmqtool) holds the store's `lock`."""


class CorruptRecord(RmqError):
    """A record failed RocketMQ's checks (magic, CRC, size) where a good one was required."""


class RemotingError(RmqError):
    """No broker or name server could be reached, or it answered with an error."""
