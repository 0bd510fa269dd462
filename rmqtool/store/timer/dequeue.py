"""The timer store's dequeue: each due slot's chain read back, delete markers applied, the
survivors converted and put to their real topic, or rolled back onto the timer topic
(`TimerDequeueGetService`, `TimerDequeuePutMessageService`, `convert`, `doPut`).
"""

from __future__ import annotations

import logging

from rmqtool.errors import InvalidInput, RmqError
from rmqtool.layouts import properties as P
from rmqtool.layouts.constants import TIMER_MAGIC_DELETE, TIMER_MAGIC_ROLL
from rmqtool.layouts.message import MessageExt
from rmqtool.store.timer.timerlog import TimerUnit
from rmqtool.store.timer.timerrules import LONG_MAX, PUT_OK, build_delete_key

log = logging.getLogger("rmqtool.store.timer.timerstore")

class TimerDequeueService:
    """The dequeue half of `TimerMessageStore` (a base of it, timerstore.py).

    The files (`timer_log`, `timer_wheel`, `timer_metrics`), the store and the read/write times
    and queue offsets are the facade's attributes; this class holds no state of its own.
    """

    def dequeue(self, now_ms: int) -> int:
        """`dequeue()` for every slot before the write time; returns messages sent to real topics."""
        delivered = 0
        p = self.precision_ms
        wheel = self.timer_wheel
        while self.curr_read_time_ms < self.curr_write_time_ms:
            if not wheel.slot_time_matches(self.curr_read_time_ms):
                # slots before the write time take no new units, so empty ones can be skipped at once
                nxt = wheel.first_live_time(self.curr_read_time_ms, self.curr_write_time_ms)
                self.curr_read_time_ms = self.curr_write_time_ms if nxt is None else nxt
                self.commit_read_time_ms = self.curr_read_time_ms
                continue
            delivered += self._dequeue_slot(self.curr_read_time_ms, now_ms)
            self.curr_read_time_ms += p
            self.commit_read_time_ms = self.curr_read_time_ms
            self.prepare_timer_checkpoint()
            self.timer_checkpoint.write()
        return delivered

    def read_chain(self, slot_last_pos: int) -> list[TimerUnit]:
        """The units of one slot, newest first (walking prevPos from lastPos)."""
        out: list[TimerUnit] = []
        pos, limit = slot_last_pos, self._max_units()
        while pos != -1 and len(out) <= limit:
            unit = self.timer_log.read_unit(pos)
            if unit is None:
                break
            out.append(unit)
            pos = unit.prev_pos
        return out

    def _dequeue_slot(self, read_time: int, now_ms: int) -> int:
        slot = self.timer_wheel.get_slot(read_time)
        warm, self._warm = self._warm, None
        if warm is not None and warm[0] == read_time and warm[1] == slot.last_pos:
            batch, deltas = warm[2]
            dequeue_ms = str(now_ms)
            for inner, _rolled in batch:
                inner.properties[P.TIMER_DEQUEUE_MS] = dequeue_ms  # same key, same place in the map
        else:
            batch, deltas = self._read_slot(slot.last_pos, now_ms)
        delivered = self._put_all(batch)
        for topic, delta in deltas.items():
            if delta:
                self.timer_metrics.add(topic, delta, now_ms)
        return delivered

    def warm_next_slot(self, now_ms: int) -> None:
        """Read and convert the next slot's messages shortly before it is due (Java's
        TimerDequeueWarmService idea), so delivery at the boundary is only the put. The result
        is used only if the slot's chain did not change in between."""
        t = self.curr_read_time_ms
        if self._warm is not None and self._warm[0] == t:
            return
        if t + self.precision_ms - now_ms > self._warm_ahead_ms:
            return
        slot = self.timer_wheel.get_slot(t)
        if slot.time_ms == -1:
            return
        self._warm = (t, slot.last_pos, self._read_slot(slot.last_pos, now_ms))

    def _read_slot(self, last_pos: int, now_ms: int) -> tuple[list[tuple[MessageExt, bool]], dict[str, int]]:
        """The dequeue of one slot up to the put: walk the chain, apply delete markers, convert.

        Also returns what the put changes in timermetrics, per real topic.
        """
        normal: list[TimerUnit] = []
        deletes: list[TimerUnit] = []
        for unit in self.read_chain(last_pos):
            if unit.magic & TIMER_MAGIC_DELETE and not unit.magic & TIMER_MAGIC_ROLL:
                deletes.append(unit)
            else:
                normal.append(unit)
        normal.reverse()  # oldest first, as `normalMsgStack.addFirst` leaves them
        delete_keys: set[str] = set()
        for unit in deletes:
            msg = self._look(unit.offset_py, unit.size_py)
            if msg is not None and msg.properties.get(P.TIMER_DEL_UNIQKEY) is not None:
                delete_keys.add(msg.properties[P.TIMER_DEL_UNIQKEY])
        batch: list[tuple[MessageExt, bool]] = []
        unmatched = set(delete_keys)
        deltas: dict[str, int] = {}  # timermetrics changes, applied once the put succeeded
        for unit in normal:
            msg = self._look(unit.offset_py, unit.size_py)
            if msg is None:
                continue
            uniq = msg.properties.get(P.UNIQ_KEY)
            if uniq is not None and delete_keys:
                key = build_delete_key(msg.properties.get(P.REAL_TOPIC), uniq)
                if key in delete_keys:
                    unmatched.discard(key)
                    continue
            real_topic = msg.properties.get(P.REAL_TOPIC)
            if real_topic and msg.properties.get(P.TIMER_ENQUEUE_MS) != str(LONG_MAX):
                deltas[real_topic] = deltas.get(real_topic, 0) - 1
            inner = self._prepare_put(msg, unit.curr_write_time, unit.magic, now_ms)
            if inner is not None:
                batch.append((inner, bool(unit.magic & TIMER_MAGIC_ROLL)))
        for key in unmatched:
            # a delete marker that cancelled nothing here took one off at enqueue: give it back
            # (the broker's `avoidDeleteLose`)
            topic = key.rpartition("+")[0]
            deltas[topic] = deltas.get(topic, 0) + 1
        return batch, deltas

    def convert(self, msg: MessageExt, enqueue_time: int, need_roll: bool, now_ms: int) -> MessageExt:
        """`convert` + `convertMessage`: the record that goes back to the real topic (or rolls).

        The properties string is built from the full map, REAL_TOPIC and REAL_QID included, as the
        broker does (it removes them from the map only after building the string).
        """
        props = dict(msg.properties)
        if enqueue_time != -1:
            props[P.TIMER_ENQUEUE_MS] = str(enqueue_time)
        if need_roll:
            props[P.TIMER_ROLL_TIMES] = str(int(props[P.TIMER_ROLL_TIMES]) + 1) if P.TIMER_ROLL_TIMES in props else "1"
        props[P.TIMER_DEQUEUE_MS] = str(now_ms)
        props = P.broker_order(props)
        if need_roll:
            topic, queue_id = msg.topic, msg.queue_id
        else:
            topic, queue_id = props[P.REAL_TOPIC], int(props[P.REAL_QID])
        return MessageExt(topic=topic, queue_id=queue_id, body=msg.body, flag=msg.flag, properties=props,
                          sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp, born_host=msg.born_host,
                          store_host=msg.store_host, reconsume_times=msg.reconsume_times)

    def _prepare_put(self, msg: MessageExt, enqueue_time: int, magic: int, now_ms: int) -> MessageExt | None:
        """`convert`, or None for what `doPut` never puts (a delete marker, a message with no real topic)."""
        need_roll = bool(magic & TIMER_MAGIC_ROLL)
        if P.REAL_TOPIC not in msg.properties or P.REAL_QID not in msg.properties:
            return None
        inner = self.convert(msg, enqueue_time, need_roll, now_ms)
        if not need_roll and P.TIMER_DEL_UNIQKEY in inner.properties:
            return None  # PUT_NO_RETRY: a delete marker is never delivered
        return inner

    def _dequeue_put(self, msg: MessageExt, enqueue_time: int, magic: int, now_ms: int) -> bool:
        """`TimerDequeuePutMessageService` for one message; True when it reached its real topic."""
        inner = self._prepare_put(msg, enqueue_time, magic, now_ms)
        if inner is None:
            return False
        return self._put_all([(inner, bool(magic & TIMER_MAGIC_ROLL))]) == 1

    def _put_all(self, batch: list[tuple[MessageExt, bool]]) -> int:
        """`doPut` for a slot's messages in one store call; returns how many reached their real topic.

        A message the store refuses for good (invalid) is skipped as the broker skips it; a put
        that fails for a runtime reason raises, so the slot is not marked done and is tried again
        on the next run (at-least-once, never lost).
        """
        if not batch:
            return 0
        put_many = getattr(self.store, "put_messages", None)
        try:
            results = put_many([m for m, _ in batch]) if put_many else [self.store.put_message(m) for m, _ in batch]
        except InvalidInput:
            results = []
            for m, _ in batch:
                try:
                    results.append(self.store.put_message(m))
                except InvalidInput as e:
                    log.warning("timer message skipped, the store refused it: %s", e)
                    results.append(None)
        delivered = 0
        for (_, rolled), result in zip(batch, results, strict=True):
            if result is None:
                continue
            status = getattr(result, "status", "PUT_OK")
            if status in PUT_OK:
                if not rolled:
                    delivered += 1
            elif status not in ("MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED", "WHEEL_TIMER_NOT_ENABLE",
                                "WHEEL_TIMER_MSG_ILLEGAL"):
                raise RmqError(f"timer delivery put failed with {status}; will retry")
        self.delivered += delivered
        return delivered
