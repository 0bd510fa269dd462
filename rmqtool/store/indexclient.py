"""The parent's side of the index process (indexproc.py): what the store holds as its `index`.

Stands in for `IndexService` while the child builds the index: the build calls of the put
path hand the keys their appender gathered to the child over the pipe (a batch's as one frame
of columns, single puts' gathered up to PENDING_MAX) and publish the newest complete record's
offset; look-ups and expiry are asked of the child, and the checkpoint's indexMsgTimestamp is
what the child reports for the last full file it flushed, so it never claims more than the
index holds. When the child is found dead, the store falls back to indexing in-process
(`_fall_back`), with a log line.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import logging
import mmap
import os
import pickle
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from rmqtool.store.index import IndexRecord, IndexService
from rmqtool.store.indexframe import encode_columns
from rmqtool.store.indexproc import (
    _DONE,
    _FRAME,
    _FULL_TS,
    _Q,
    _SHM_SIZE,
    CLOSE_TIMEOUT_S,
    LOOKUP_WAIT_S,
    PENDING_MAX,
    REQUEST_TIMEOUT_S,
    RecordReader,
    catch_up,
    open_after_crash,
    resume_point,
)

log = logging.getLogger("rmqtool.store.indexproc")
_START_TIMEOUT_S = 30.0
PIPE_SIZE = 1 << 20  # bytes of keys the child may be behind before a put waits
SEND_TIMEOUT_S = 30.0  # a put waits this long for room in a full pipe, then the child is given up


class IndexProcessError(Exception):
    """The index process could not be started or stopped answering."""


class IndexProcess:
    """An index built by a child process; the `IndexService` API the store and its appenders use."""

    offloaded = True

    def __init__(self, store: Any) -> None:
        self.store = store
        cfg = store.config
        self.directory: Path = store.root / "index"
        self.cl_dir: Path = store.root / "commitlog"
        self.file_size: int = cfg.mapped_file_size_commit_log
        self.hash_slot_num: int = cfg.max_hash_slot_num
        self.index_num: int = cfg.max_index_num
        self.fallback: IndexService | None = None  # set once the child is given up
        self._lock = threading.Lock()  # one request at a time
        self._fallback_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._last_full = 0
        fd = os.memfd_create("rmqtool-index", os.MFD_CLOEXEC)
        os.ftruncate(fd, _SHM_SIZE)
        self._shm_fd = fd
        self.shm = mmap.mmap(fd, _SHM_SIZE)
        self.published = -1  # start offset of the newest record handed to the child
        self._pending: list[IndexRecord] = []  # single puts' keys, sent PENDING_MAX at a time
        self._send_lock = threading.Lock()  # the pipe: put path and requests
        self._broken = False
        self.proc: subprocess.Popen[bytes] | None = None
        self._idle: bool | None = False  # the child's policy is SCHED_IDLE; None: left as it is
        self._policy_lock = threading.Lock()
        self._waiters = 0  # threads waiting on the child: it runs at the normal policy meanwhile

    # -- the child ---------------------------------------------------------------------------------
    def start(self, start: int, last_full: int = 0) -> None:
        """Start the child at CommitLog offset `start` (everything before it is indexed);
        `last_full` is the in-process index's endTimestamp of its last full file until the child has its own."""
        self._last_full = last_full
        # this rmqtool's own directory first: `-m` would put the working directory, which may hold
        # another checkout, ahead of it
        root = str(Path(__file__).resolve().parents[2])
        code = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
                "from rmqtool.store.indexproc import child_main; child_main(sys.argv[1:])")
        args = [sys.executable, "-c", code, root, str(self.directory), str(self.hash_slot_num),
                str(self.index_num), str(start), str(self._shm_fd), str(os.getpid())]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=(self._shm_fd,),
                                     close_fds=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._idle = False  # a new child: the normal policy until set
        self._set_idle(True)
        self._send = Connection(os.dup(self.proc.stdin.fileno()), readable=False)
        self._recv = Connection(os.dup(self.proc.stdout.fileno()), writable=False)
        self.proc.stdin.close()
        self.proc.stdout.close()
        try:  # room for ~1 s of keys: the put path waits only when the child is that far behind
            fcntl.fcntl(self._send.fileno(), 1031, PIPE_SIZE)  # F_SETPIPE_SZ
        except OSError:
            pass
        os.set_blocking(self._send.fileno(), False)  # a child that stops reading must not hang the put path
        if not self._recv.poll(_START_TIMEOUT_S):
            self._kill()
            raise IndexProcessError("the index process did not start")
        try:
            kind, _pos = self._recv.recv()
        except (EOFError, OSError):
            self._kill()
            raise IndexProcessError("the index process exited at start") from None
        if kind != "ready":
            self._kill()
            raise IndexProcessError(f"the index process said {kind!r}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _kill(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()  # our own child, by its pid
        if proc is not None:
            proc.wait()
        for conn in (getattr(self, "_send", None), getattr(self, "_recv", None)):
            if conn is not None:
                conn.close()
        self._send = self._recv = None  # type: ignore[assignment]

    def _set_idle(self, idle: bool) -> None:
        """The child's scheduling policy: SCHED_IDLE while the parent puts, SCHED_OTHER while it waits.

        Java's ReputMessageService is a thread beside the put path; here the child would take a
        core's share from serve's one event-loop thread and the clients whenever the cores are
        busy (measured: with batches from 4 producers the loop thread then waited for a core
        a quarter of the time). Under SCHED_IDLE it runs on what the others leave idle and
        catches up through its pipe. Whenever the parent waits for it (a look-up, expiry, close,
        a full pipe) it is raised to the normal policy (`_waiting`), so it is never starved past
        a wait's timeout. Where the system refuses the policy the child keeps the normal one."""
        if self.proc is None or self._idle is None or self._idle is idle:
            return
        try:
            os.sched_setscheduler(self.proc.pid, os.SCHED_IDLE if idle else os.SCHED_OTHER, os.sched_param(0))
            self._idle = idle
        except (OSError, AttributeError):  # gone, refused, or no such call here: the normal policy
            self._idle = None

    @contextlib.contextmanager
    def _waiting(self) -> Iterator[None]:
        """The child at the normal policy while any thread of the parent waits on it."""
        with self._policy_lock:
            self._waiters += 1
            if self._waiters == 1:
                self._set_idle(False)
        try:
            yield
        finally:
            with self._policy_lock:
                self._waiters -= 1
                if not self._waiters:
                    self._set_idle(True)

    def _ask(self, req: tuple[Any, ...], timeout: float) -> Any:
        """Send one request, wait for its answer; IndexProcessError when the child does not give it."""
        with self._lock, self._waiting():
            if self._send is None or not self.alive():
                raise IndexProcessError("the index process is not running")
            try:
                with self._send_lock:
                    self._send_pending()
                    self._write(req)
                deadline = time.monotonic() + timeout
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0 or not self._recv.poll(min(left, 0.5)):
                        if left <= 0 or not self.alive():
                            raise IndexProcessError("the index process gave no answer")
                        continue
                    rid, value = self._recv.recv()
                    if rid == req[1]:
                        return value
            except (EOFError, OSError, BrokenPipeError) as e:
                raise IndexProcessError(f"the index process is gone ({e})") from None

    def _fall_back(self, why: str, *, locked: bool) -> IndexService:
        """Index in-process from where the child stopped (caller holds the put lock if `locked`).

        The put lock is taken before `_fallback_lock`, as cleanup (which calls `delete_expired`
        holding it) does, so two threads giving the child up cannot deadlock.
        """
        if self.fallback is not None:
            return self.fallback
        put_lock = self.store.commitlog.put_lock
        if not locked:
            put_lock.acquire()
        try:
            with self._fallback_lock:
                if self.fallback is not None:
                    return self.fallback
                code = self.proc.returncode if self.proc is not None else None
                log.warning("index process %s (%s, exit %s): indexing in-process from now on",
                            self.proc.pid if self.proc else "-", why, code)
                self._kill()
                self._pending = []  # in the CommitLog: the catch-up below indexes them
                service = open_after_crash(self.directory, self.hash_slot_num, self.index_num)
                reader = RecordReader(self.cl_dir, self.file_size)
                try:
                    pos = resume_point(service, reader, _Q.unpack_from(self.shm, _DONE)[0])
                    catch_up(service, reader, pos, self.published)
                finally:
                    reader.close()
                self._last_full = max(self._last_full, _Q.unpack_from(self.shm, _FULL_TS)[0])
                self.fallback = service
                if self.store.dispatcher.index is self:
                    self.store.dispatcher.index = service
                return service
        finally:
            if not locked:
                put_lock.release()

    # -- the IndexService API ----------------------------------------------------------------------
    def _post(self, msg: tuple[Any, ...] | bytes) -> None:
        """Send keys to the child (caller holds `_send_lock`); a broken pipe is left to `_fall_back`."""
        if self._broken:
            return
        try:
            self._write(msg)
        except (OSError, ValueError, AttributeError, IndexProcessError) as e:
            self._broken = True  # given up at the next flush, look-up, expiry or close
            if isinstance(e, IndexProcessError) and self.alive():
                assert self.proc is not None
                self.proc.kill()  # it stopped reading: it must not write the files any more

    def _write(self, msg: tuple[Any, ...] | bytes) -> None:
        """One message (a tuple pickled, or a frame of `encode_columns` as it is) in `Connection`'s
        framing on the non-blocking pipe, waiting at most SEND_TIMEOUT_S for room (a full pipe:
        the child is that far behind, or stopped)."""
        data = msg if isinstance(msg, bytes) else pickle.dumps(msg, pickle.HIGHEST_PROTOCOL)
        view = memoryview(_FRAME.pack(len(data)) + data)
        fd = self._send.fileno()
        deadline = 0.0
        with contextlib.ExitStack() as waiting:
            while view:
                try:
                    view = view[os.write(fd, view):]
                except BlockingIOError:
                    now = time.monotonic()
                    if not deadline:
                        deadline = now + SEND_TIMEOUT_S
                        waiting.enter_context(self._waiting())  # a whole pipe behind: its normal policy
                    elif now > deadline:
                        raise IndexProcessError("the index process takes no more keys") from None
                    select.select([], [fd], [], 0.05)

    def _send_pending(self) -> None:
        if self._pending:
            batch, self._pending = self._pending, []
            self._post(("b", batch))

    def build_index_columns(self, topics: list[str], store_timestamp: int, phys: list[int],
                            uniq_keys: list[str | None], key_texts: list[str | None]) -> None:
        """`build_index_columns` of one appended batch (the appenders' one call point): sent to
        the child as a frame of `encode_columns`, pickled when a value cannot go in one."""
        if self.fallback is not None:
            self.fallback.build_index_columns(topics, store_timestamp, phys, uniq_keys, key_texts)
            return
        frame = encode_columns(topics, store_timestamp, phys, uniq_keys, key_texts)
        with self._send_lock:
            if self._pending:
                self._send_pending()
            self._post(frame if frame is not None else ("u", topics, store_timestamp, phys, uniq_keys, key_texts))
            self.published = phys[-1]

    def build_index(self, topic: str, phy_offset: int, store_timestamp: int, uniq_key: str | None,
                    key_text: str | None, now_ms: int) -> None:
        if self.fallback is not None:
            self.fallback.build_index(topic, phy_offset, store_timestamp, uniq_key, key_text, now_ms)
            return
        with self._send_lock:
            self._pending.append((topic, phy_offset, store_timestamp, uniq_key, key_text))
            self.published = phy_offset
            if len(self._pending) >= PENDING_MAX:
                self._send_pending()

    def build_index_batch(self, records: list[IndexRecord]) -> None:
        if self.fallback is not None:
            self.fallback.build_index_batch(records)
        elif records:
            with self._send_lock:
                self._send_pending()
                self._post(("b", records))
                self.published = records[-1][1]

    def build_index_usual(self, topic: str, store_timestamp: int, phys: list[int], uniq_keys: list[str],
                          keys: list[str]) -> None:
        self.build_index_columns([topic] * len(phys), store_timestamp, phys, uniq_keys, keys)  # type: ignore[arg-type]

    def query_offsets(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """`IndexService.queryOffset`, answered by the child after everything put before the call.

        No answer within LOOKUP_WAIT_S (a hung child): it is given up and the look-up answered
        in-process after the fall-back has indexed everything.
        """
        if self.fallback is None:
            try:
                return self._ask(("q", next(self._ids), topic, key, max_num, begin, end), LOOKUP_WAIT_S)
            except IndexProcessError as e:
                self._fall_back(str(e), locked=False)
        assert self.fallback is not None
        return self.fallback.query_offsets(topic, key, max_num, begin, end)

    def delete_expired(self, commitlog_min: int) -> int:
        """`IndexService.deleteExpiredFile`, by the child (cleanup calls it holding the put lock)."""
        if self.fallback is None:
            try:
                return int(self._ask(("d", next(self._ids), commitlog_min), REQUEST_TIMEOUT_S))
            except IndexProcessError as e:
                self._fall_back(str(e), locked=True)
        assert self.fallback is not None
        return self.fallback.delete_expired(commitlog_min)

    def indexed_offset(self) -> int:
        """Every record starting below this offset is indexed (as the child last reported)."""
        return _Q.unpack_from(self.shm, _DONE)[0]

    @property
    def last_full_end_timestamp(self) -> int:
        if self.fallback is not None:
            return max(self._last_full, self.fallback.last_full_end_timestamp)
        return max(self._last_full, _Q.unpack_from(self.shm, _FULL_TS)[0])

    @property
    def files(self) -> list[Any]:
        return self.fallback.files if self.fallback is not None else []

    def flush(self) -> None:
        """The child flushes its files itself; here only whether it still runs is looked at.

        Called by the flush thread holding the flush lock, which comes after the put lock:
        a fall-back (which takes the put lock) goes to a thread of its own.
        """
        if self.fallback is not None:
            self.fallback.flush()
            return
        with self._send_lock:
            self._send_pending()  # single puts' keys wait here at most one flush interval
        if (self._broken or not self.alive()) and self.proc is not None:
            threading.Thread(target=self._fall_back, args=("exited",), kwargs={"locked": False},
                             name="index-fallback", daemon=True).start()

    def drain(self) -> None:
        """Clean close: the child indexes all that was published, flushes and closes its files, exits.

        The store calls it before its last flush, so the checkpoint then written has the
        child's final indexMsgTimestamp. A child that does not finish is given up (`_fall_back`).
        """
        if self.fallback is None and self.proc is not None:
            try:
                self._ask(("c", next(self._ids)), CLOSE_TIMEOUT_S)
                self.proc.wait(CLOSE_TIMEOUT_S)
                self._kill()
                self.proc = None
            except (IndexProcessError, subprocess.TimeoutExpired) as e:
                self._fall_back(str(e), locked=False)

    def discard(self) -> None:
        """A child that never took over: stop it, leave the index files to the store."""
        self._kill()
        self.proc = None
        if not self.shm.closed:
            self.shm.close()
            os.close(self._shm_fd)

    def close(self) -> None:
        self.drain()
        if self.fallback is not None:
            self.fallback.flush()
            self.fallback.close()
        if not self.shm.closed:
            self.shm.close()
            os.close(self._shm_fd)
