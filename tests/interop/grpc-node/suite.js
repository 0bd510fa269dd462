// Apache's Node.js 5.x SDK (npm rocketmq-client-nodejs, pinned by package-lock.json) against one
// gRPC endpoint (serve's or Apache's proxy); what it saw printed as JSON lines for
// tests/interop/test_grpc.py:
//   node suite.js send ENDPOINT TOPIC N          one line per receipt {"i":..,"id":..}
//   node suite.js simple ENDPOINT TOPIC GROUP N  receive N, ack all but the last, change its
//                                                invisible duration to 2 s, receive it again
//   node suite.js fifo ENDPOINT TOPIC N          N sends in message groups g0, g1; receipts
//   node suite.js transaction ENDPOINT TOPIC     commit, rollback, one left to the check-back
//   node suite.js push ENDPOINT TOPIC GROUP N    a push consumer until N messages; the first
//                                                one fails once and comes back
//   node suite.js recall ENDPOINT TOPIC          a message delayed 8 s recalled at once, a
//                                                second recall of it, a bad handle
'use strict';
const { ConsumeResult, Producer, PushConsumer, SimpleConsumer } = require('rocketmq-client-nodejs');
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

const out = obj => process.stdout.write(JSON.stringify(obj) + '\n');

async function send(endpoints, topic, n) {
  const producer = new Producer({ endpoints, namespace: '', topic });
  await producer.startup();
  try {
    for (let i = 0; i < n; i++) {
      const r = await producer.send({
        topic, tag: 'TagN', keys: [`kn${i}`], properties: new Map([['seq', String(i)]]),
        body: Buffer.from(`node ${i}`),
      });
      out({ i, id: r.messageId });
    }
  } finally {
    await producer.shutdown();
  }
}

async function simple(endpoints, topic, group, n) {
  const consumer = new SimpleConsumer({
    endpoints, namespace: '', consumerGroup: group, awaitDuration: 5000,
    subscriptions: new Map([[topic, '*']]),
  });
  await consumer.startup();
  try {
    const got = [];
    let deadline = Date.now() + 30000;
    while (got.length < n && Date.now() < deadline) got.push(...await consumer.receive(16, 15000));
    for (const m of got) {
      out({ id: m.messageId, topic: m.topic, body: m.body.toString(), tag: m.tag || '', keys: m.keys,
        props: Object.fromEntries(m.properties), attempt: m.deliveryAttempt });
    }
    if (!got.length) return;
    const later = got[got.length - 1];
    for (const m of got) if (m !== later) await consumer.ack(m);
    await consumer.changeInvisibleDuration(later, 2000);
    const again = [];
    deadline = Date.now() + 40000;
    while (!again.length && Date.now() < deadline) again.push(...await consumer.receive(16, 15000));
    for (const m of again) {
      out({ redelivered: m.messageId, attempt: m.deliveryAttempt });
      await consumer.ack(m);
    }
  } finally {
    await consumer.shutdown();
  }
}

async function fifo(endpoints, topic, n) {
  const producer = new Producer({ endpoints, namespace: '', topic });
  await producer.startup();
  try {
    for (let i = 0; i < n; i++) {
      const r = await producer.send({
        topic, tag: 'TagF', keys: [`kf${i}`], properties: new Map([['seq', String(i)]]),
        messageGroup: `g${i % 2}`, body: Buffer.from(`fifo ${i}`),
      });
      out({ i, id: r.messageId, queue: r.messageQueue.queueId });
    }
  } finally {
    await producer.shutdown();
  }
}

async function transaction(endpoints, topic) {
  const checked = [];
  const producer = new Producer({
    endpoints, namespace: '', topic,
    checker: {
      async check(view) {
        const body = view.body.toString();
        checked.push(body);
        return body === 'rolled back' ? TransactionResolution.ROLLBACK : TransactionResolution.COMMIT;
      },
    },
  });
  await producer.startup();
  try {
    const message = body => ({ topic, tag: 'TagT', body: Buffer.from(body) });
    const t1 = producer.beginTransaction();
    await producer.send(message('committed'), t1);
    const t2 = producer.beginTransaction();
    await producer.send(message('rolled back'), t2);
    const t3 = producer.beginTransaction();
    await producer.send(message('checked'), t3); // never ended here: the broker asks
    await t1.commit();
    await t2.rollback();
    const deadline = Date.now() + 90000; // a loaded broker checks late
    while (!checked.includes('checked') && Date.now() < deadline) await new Promise(r => setTimeout(r, 100));
    await new Promise(r => setTimeout(r, 1000)); // the EndTransaction of the check-back goes out on its own
    out({ checked });
  } finally {
    await producer.shutdown();
  }
}

async function push(endpoints, topic, group, n) {
  const bodies = new Set();
  const attempts = {};
  let failed = false;
  const consumer = new PushConsumer({
    endpoints, namespace: '', consumerGroup: group, subscriptions: new Map([[topic, '*']]),
    longPollingTimeout: 5000, // the SDK's 30 s would hold up its shutdown
    messageListener: {
      consume(view) {
        const body = view.body.toString();
        attempts[body] = Math.max(attempts[body] || 0, view.deliveryAttempt);
        if (!failed) {
          failed = true;
          return ConsumeResult.FAILURE;
        }
        bodies.add(body);
        return ConsumeResult.SUCCESS;
      },
    },
  });
  const t0 = Date.now();
  await consumer.startup();
  try {
    const deadline = Date.now() + 120000;
    while (bodies.size < n && Date.now() < deadline) await new Promise(r => setTimeout(r, 100));
    out({ bodies: [...bodies].sort(), attempts, ms: Date.now() - t0 });
  } finally {
    // its shutdown waits out the receives in flight (up to ~20 s): give it 3 s, the process ends anyway
    await Promise.race([ consumer.shutdown(), new Promise(r => setTimeout(r, 3000)) ]);
  }
}

async function recall(endpoints, topic) {
  const producer = new Producer({ endpoints, namespace: '', topic });
  await producer.startup();
  const attempt = async f => {
    try {
      return { ok: await f() };
    } catch (e) {
      return { error: String(e && e.message || e) };
    }
  };
  try {
    const r = await producer.send({ topic, tag: 'TagD', body: Buffer.from('recall me'), delay: 8000 });
    const kept = await producer.send({ topic, tag: 'TagD', body: Buffer.from('keep me'), delay: 3000 });
    out({ sent: r.messageId, handle: r.recallHandle, kept: kept.messageId });
    const first = await attempt(async () => (await producer.recallMessage(topic, r.recallHandle)).messageId);
    out({ recalled: first });
    const second = await attempt(async () => (await producer.recallMessage(topic, r.recallHandle)).messageId);
    out({ again: second });
    const bad = await attempt(async () => (await producer.recallMessage(topic, 'not a handle')).messageId);
    out({ bad });
  } finally {
    await producer.shutdown();
  }
}

async function main() {
  const [cmd, endpoints, ...rest] = process.argv.slice(2);
  if (cmd === 'send') await send(endpoints, rest[0], Number(rest[1]));
  else if (cmd === 'simple') await simple(endpoints, rest[0], rest[1], Number(rest[2]));
  else if (cmd === 'fifo') await fifo(endpoints, rest[0], Number(rest[1]));
  else if (cmd === 'transaction') await transaction(endpoints, rest[0]);
  else if (cmd === 'push') await push(endpoints, rest[0], rest[1], Number(rest[2]));
  else if (cmd === 'recall') await recall(endpoints, rest[0]);
  else throw new Error(`unknown command ${cmd}`);
}

main().then(() => process.exit(0), err => {
  process.stderr.write(`${err && err.stack || err}\n`);
  process.exit(1);
});
