"""Child process of the crash test: sends numbered messages under SYNC_FLUSH until killed.

Usage: python crash_child.py STORE_DIR FIRST_ID THREADS
Prints each id on its own line (flushed) only after put_message returned PUT_OK, so every
printed id is an acknowledged, fsynced message.
"""

from __future__ import annotations

import sys
import threading

from rmqtool.layouts.message import MessageExt
from rmqtool.store.config import StoreConfig
from rmqtool.store.messagestore import MessageStore

TOPIC = "CrashTopic"


def crash_config() -> StoreConfig:
    return StoreConfig(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=50 * 20,
                       max_hash_slot_num=64, max_index_num=400, flush_disk_type="SYNC_FLUSH")


def message(msg_id: int) -> MessageExt:
    return MessageExt(topic=TOPIC, queue_id=msg_id % 4, body=f"crash-{msg_id}-".encode() * 5,
                      properties={"TAGS": "T", "KEYS": f"k{msg_id}", "UNIQ_KEY": f"ID{msg_id}"})


def main() -> None:
    root, first, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = MessageStore.open(root, crash_config())
    out_lock = threading.Lock()
    out = sys.stdout

    def sender(t: int) -> None:
        n = 0
        while True:
            msg_id = first + t * 1_000_000 + n
            n += 1
            r = store.put_message(message(msg_id))
            if r.status == "PUT_OK":
                with out_lock:
                    out.write(f"{msg_id}\n")
                    out.flush()

    out.write("ready\n")
    out.flush()
    workers = [threading.Thread(target=sender, args=(t,), daemon=True) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


if __name__ == "__main__":
    main()
