"""Apache's mqadmin (5.3.3) on a broker group of a master and its slave, rmqtool's and, as the
reference, Apache's (both registered with rmqtool's name server, the slave learning its master's
HA address from it): `clusterList` shows the master (BID 0, activated) and the slave (BID 1, not
activated); `haStatus -b` on the master lists the connected slave in sync (GET_BROKER_HA_STATUS,
907), and on the slave the HA master it follows, as HAStatusSubCommand prints them."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.broker.conftest import Wire, create_topic, send_ext
from tests.cluster_helpers import free_broker_port, master_conf, slave_conf, start_broker, start_namesrv

from .conftest import free_port, kill_apache, start_apache
from .harness import require_java
from .mqadmin_session import MQAdmin, cluster_rows, ok

pytestmark = pytest.mark.interop


@dataclass
class Group:
    namesrv: str
    master: str
    slave: str
    master_ha: str  # the HA address the slave follows
    stops: list[Any] = field(default_factory=list)


def _rmqtool_group(tmp: Path) -> Group:
    ns_proc, ns = start_namesrv(tmp)
    g = Group(ns, "", "", "", [ns_proc.stop])
    port = free_broker_port()
    m_proc, g.master = start_broker(tmp, "m", ns, master_conf("broker-a"), port=port)
    g.stops.insert(0, m_proc.stop)
    g.master_ha = f"127.0.0.1:{port + 1}"
    create_topic(g.master, "HaT", 1)
    s_proc, g.slave = start_broker(tmp, "s", ns, slave_conf("broker-a"))
    g.stops.insert(0, s_proc.stop)
    return g


def _apache_group(tmp: Path) -> Group:
    ns_proc, ns = start_namesrv(tmp)
    g = Group(ns, "", "", "", [ns_proc.stop])
    ha = free_port()
    master = start_apache(tmp / "apache-m", f"namesrvAddr={ns}", "brokerName=broker-a", f"haListenPort={ha}")
    g.stops.insert(0, lambda: kill_apache(master))  # nothing reads the stores afterwards
    g.master, g.master_ha = master.broker, f"127.0.0.1:{ha}"
    create_topic(g.master, "HaT", 1)
    # no haMasterAddress: the slave takes it from rmqtool's REGISTER_BROKER answer
    slave = start_apache(tmp / "apache-s", f"namesrvAddr={ns}", "brokerName=broker-a", "brokerRole=SLAVE",
                         "brokerId=1", f"haListenPort={free_port()}")
    g.stops.insert(0, lambda: kill_apache(slave))
    g.slave = slave.broker
    return g


@pytest.fixture(params=["rmqtool", "apache"])
def group(request, tmp_path) -> Iterator[Group]:
    require_java()
    g = Group("", "", "", "")
    try:
        g = (_rmqtool_group if request.param == "rmqtool" else _apache_group)(tmp_path)
        yield g
    finally:
        for stop in g.stops:
            stop()


def _fields(out: str) -> dict[str, str]:
    """`#Name<TAB>value` lines of haStatus."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^#(\w[\w()/]*)\t(.*)$", out, re.MULTILINE)}


def test_cluster_list_and_ha_status_of_a_master_and_its_slave(group, tmp_path):
    w = Wire(group.master)
    assert w.request(310, send_ext("HaT", 0), b"x" * 100).code == 0
    w.close()
    admin = MQAdmin(group.namesrv, tmp_path / "home")
    try:
        deadline = time.time() + 60
        while True:
            rows = cluster_rows(ok(admin.run("clusterList")))
            ha = ok(admin.run("haStatus", "-b", group.master))
            f = _fields(ha)
            if (len(rows) == 2 and f.get("InSyncSlaveNum") == "1" and re.search(r"\s0\s+[\d.]+\s+OK\s", ha)) \
                    or time.time() > deadline:
                break
            time.sleep(1)
        by_bid = {r["bid"]: r for r in rows}
        assert set(by_bid) == {"0", "1"}, rows
        assert by_bid["0"]["addr"] == group.master and by_bid["0"]["activated"] == "true"
        assert by_bid["1"]["addr"] == group.slave and by_bid["1"]["activated"] == "false"
        assert all(r["broker"] == "broker-a" and r["cluster"] == "DefaultCluster" for r in rows)

        assert f["MasterAddr"] == group.master and f["SlaveNum"] == "1" and f["InSyncSlaveNum"] == "1", ha
        slave_line = [line for line in ha.splitlines() if line.startswith("127.0.0.1:")]
        assert len(slave_line) == 1, ha
        cols = slave_line[0].split()
        assert int(cols[2]) == 0 and cols[4] == "OK", ha  # Diff 0: the slave has everything
        assert int(cols[1]) == int(f["MasterCommitLogMaxOffset"]) > 0

        out = ok(admin.run("haStatus", "-b", group.slave))
        f = _fields(out)
        assert f["MasterAddr"] == group.master_ha, out
        assert int(f["CommitLogMaxOffset"]) == int(cols[1]), out
    finally:
        admin.close()
