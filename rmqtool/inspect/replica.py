"""`inspect store` on a replica: how far a slave's store is behind its master.

A store is a replica when its broker.conf says `brokerRole=SLAVE` or `--master` names the master
(its broker address, or a name server that lists it). The store's own figures come from the
summary (the CommitLog's end and each queue's max offset); the master's from a probe the caller
passes (rmqtool.client.masterstate: GET_BROKER_HA_STATUS as `mqadmin haStatus`, GET_MAX_OFFSET
per queue). The lag is what `DefaultHAService` counts: the master's CommitLog max offset minus
the slave's, in bytes, and per queue in messages. An unreachable master is reported through
`warn` and the offline view (the store's own figures) is still shown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqtool.errors import RemotingError
from rmqtool.inspect.layoutconfig import read_properties
from rmqtool.inspect.model import Filters, Item

Probe = Callable[[str, "str | None", list[tuple[str, int]]], Any]  # -> client.masterstate.MasterState


@dataclass
class ReplicaTarget:
    role: str | None  # brokerRole of the store's broker.conf, if it has one
    master: str | None  # where to ask: --master, else the broker.conf's namesrvAddr
    broker_name: str | None


def replica_target(root: Path, master: str | None) -> ReplicaTarget | None:
    """Whom to ask about the store at `root`, or None when it is not a replica."""
    props: dict[str, str] = {}
    conf = root / "broker.conf"
    if conf.is_file():
        try:
            props = read_properties(conf)
        except OSError:
            props = {}
    role = (props.get("brokerRole") or "").strip().upper() or None
    name = (props.get("brokerName") or "").strip() or None
    if master:
        return ReplicaTarget(role, master, name)
    if role != "SLAVE":
        return None
    namesrv = next((a.strip() for a in (props.get("namesrvAddr") or "").split(";") if a.strip()), None)
    return ReplicaTarget(role, namesrv, name)


def is_slave_store(root: Path) -> bool:
    """The store's broker.conf says brokerRole=SLAVE (verify then treats it as a replica)."""
    target = replica_target(root, None)
    return target is not None and target.role == "SLAVE"


def with_replica(items: Iterator[Item], root: Path, master: str | None, f: Filters, probe: Probe,
                 warn: Callable[[str], None]) -> Iterator[Item]:
    """`items` of `inspect store`, then the replica section when the store is one."""
    target = replica_target(root, master)
    if target is None:
        yield from items
        return
    own_max: int | None = None
    queues: dict[tuple[str, int], int] = {}
    for it in items:
        section = it.fields.get("section")
        if it.kind == "store" and section == "commitlog":
            own_max = int(it.fields["maxOffset"])
        elif it.kind == "store" and section in ("queue", "batchqueue"):
            queues[(str(it.fields["topic"]), int(it.fields["queueId"]))] = int(it.fields["maxOffset"])
        yield it
    state, error = None, None
    if target.master is None:
        error = "its broker.conf says brokerRole=SLAVE but names no namesrvAddr to find the master"
        warn(f"{error}: pass --master HOST:PORT for the lag; showing the store offline")
    else:
        try:
            state = probe(target.master, target.broker_name, sorted(queues))
        except RemotingError as e:
            error = str(e)
            warn(f"master of this replica not reachable ({error}); showing the store offline")
    yield from replica_items(target, own_max or 0, queues, state, error, f)


def replica_items(target: ReplicaTarget, own_max: int, queues: dict[tuple[str, int], int], state: Any,
                  error: str | None, f: Filters) -> Iterator[Item]:
    rows = []
    if state is not None:
        for key in sorted(set(queues) | set(state.queue_max_offsets)):
            topic, qid = key
            if (f.topic is not None and topic != f.topic) or (f.queue is not None and qid != f.queue):
                continue
            ours, theirs = queues.get(key, 0), state.queue_max_offsets.get(key)
            if key not in queues and not theirs:
                continue  # a queue of the master with no message, which the slave has not either
            rows.append({"section": "replica-queue", "topic": topic, "queueId": qid, "maxOffset": ours,
                         "masterMaxOffset": theirs, "lag": None if theirs is None else theirs - ours})
    master_max = state.commitlog_max_offset if state is not None else None
    yield Item("store", "replica", 0, {
        "section": "replica", "role": target.role, "master": state.addr if state is not None else target.master,
        "namesrv": state.namesrv if state is not None else None, "masterReachable": state is not None,
        "maxOffset": own_max, "masterMaxOffset": master_max,
        "lagBytes": None if master_max is None else master_max - own_max,
        "queuesBehind": sum(1 for r in rows if (r["lag"] or 0) > 0) if state is not None else None,
        "messagesBehind": sum(max(0, r["lag"] or 0) for r in rows) if state is not None else None,
        "masterSlaves": None if state is None or state.slaves is None else len(state.slaves),
        "error": error})
    for c in (state.slaves or []) if state is not None else []:
        yield Item("store", "replica/slaves", 0, {
            "section": "replica-slave", "addr": c.addr, "slaveAckOffset": c.slaveAckOffset, "diff": c.diff,
            "inSync": c.inSync, "transferredByteInSecond": c.transferredByteInSecond})
    for r in rows:
        yield Item("store", f"replica/{r['topic']}/{r['queueId']}", 0, r)
