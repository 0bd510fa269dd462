"""Apache's mqadmin (5.3.3) on an rmqtool broker group: `clusterList` shows the master (BID 0,
activated) and the slave (BID 1, not activated) as it shows Apache's; `haStatus -b` on the master
lists the connected slave in sync (GET_BROKER_HA_STATUS, 907), and on the slave the master it
follows, as HAStatusSubCommand prints them."""

from __future__ import annotations

import re
import time

import pytest

from tests.broker.conftest import Wire, create_topic, send_ext
from tests.cluster_helpers import master_conf, slave_conf, start_broker, start_namesrv

from .harness import require_java
from .test_mqadmin import MQAdmin, cluster_rows, ok

pytestmark = pytest.mark.interop


def _fields(out: str) -> dict[str, str]:
    """`#Name<TAB>value` lines of haStatus."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^#(\w[\w()/]*)\t(.*)$", out, re.MULTILINE)}


def test_cluster_list_and_ha_status_of_a_master_and_its_slave(tmp_path):
    require_java()
    procs = []
    admin = None
    try:
        ns_proc, ns = start_namesrv(tmp_path)
        procs.append(ns_proc)
        m_proc, master = start_broker(tmp_path, "m", ns, master_conf("broker-a"))
        procs.append(m_proc)
        create_topic(master, "HaT", 1)
        w = Wire(master)
        assert w.request(310, send_ext("HaT", 0), b"x" * 100).code == 0
        w.close()
        s_proc, slave = start_broker(tmp_path, "s", ns, slave_conf("broker-a"))
        procs.append(s_proc)
        admin = MQAdmin(ns, tmp_path / "home")
        deadline = time.time() + 30
        while True:
            rows = cluster_rows(ok(admin.run("clusterList")))
            ha = ok(admin.run("haStatus", "-b", master))
            if (len(rows) == 2 and re.search(r"\sOK\s", ha)) or time.time() > deadline:
                break
            time.sleep(1)
        by_bid = {r["bid"]: r for r in rows}
        assert set(by_bid) == {"0", "1"}, rows
        assert by_bid["0"]["addr"] == master and by_bid["0"]["activated"] == "true"
        assert by_bid["1"]["addr"] == slave and by_bid["1"]["activated"] == "false"
        assert all(r["broker"] == "broker-a" and r["cluster"] == "DefaultCluster" for r in rows)

        f = _fields(ha)
        assert f["MasterAddr"] == master and f["SlaveNum"] == "1" and f["InSyncSlaveNum"] == "1", ha
        slave_line = [line for line in ha.splitlines() if line.startswith("127.0.0.1:")]
        assert len(slave_line) == 1, ha
        cols = slave_line[0].split()
        assert int(cols[2]) == 0 and cols[4] == "OK", ha  # Diff 0: the slave has everything
        assert int(cols[1]) == int(f["MasterCommitLogMaxOffset"]) > 0

        out = ok(admin.run("haStatus", "-b", slave))
        f = _fields(out)
        host, port = master.rsplit(":", 1)
        assert f["MasterAddr"] == f"{host}:{int(port) + 1}", out
        assert int(f["CommitLogMaxOffset"]) > 0, out
    finally:
        if admin is not None:
            admin.close()
        for p in reversed(procs):
            p.stop()
