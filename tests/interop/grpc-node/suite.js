// Apache's Node.js 5.x SDK (npm rocketmq-client-nodejs, pinned by package-lock.json) against one
// gRPC endpoint (serve's or Apache's proxy); what it saw printed as JSON lines for
// tests/interop/test_grpc.py:
//   node suite.js send ENDPOINT TOPIC N          one line per receipt {"i":..,"id":..}
//   node suite.js simple ENDPOINT TOPIC GROUP N  receive N, ack all but the last, change its
//                                                invisible duration to 2 s, receive it again
'use strict';
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

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

async function main() {
  const [cmd, endpoints, ...rest] = process.argv.slice(2);
  if (cmd === 'send') await send(endpoints, rest[0], Number(rest[1]));
  else if (cmd === 'simple') await simple(endpoints, rest[0], rest[1], Number(rest[2]));
  else throw new Error(`unknown command ${cmd}`);
}

main().then(() => process.exit(0), err => {
  process.stderr.write(`${err && err.stack || err}\n`);
  process.exit(1);
});
