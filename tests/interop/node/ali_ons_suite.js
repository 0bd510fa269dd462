'use strict';
// npm ali-ons 3.12.0 (a pure-JavaScript RocketMQ client) against a name server: producer and push
// consumer scenarios, each checking its own outcome. One JSON line per check on stdout:
// {"scenario": ..., "ok": true|false, "detail": ..., "ms": ...}; exit code 1 if any failed.
//
// Usage: node ali_ons_suite.js NAMESRV_ADDR [scenario,scenario...] [--wait-scale F]
// Scenarios: produce-consume, retry-dlq, delay, split.
// ali-ons needs `nameSrv` and an `httpclient` (only used to look the name server up over HTTP,
// which we never do). It neither auto-creates topics on send nor waits for them on subscribe:
// each scenario first creates its topic with ali-ons' own UPDATE_AND_CREATE_TOPIC (code 17).

const { Producer, Consumer, Message } = require('ali-ons');

const namesrv = process.argv[2];
const only = process.argv[3] && !process.argv[3].startsWith('--') ? new Set(process.argv[3].split(',')) : null;
const scaleAt = process.argv.indexOf('--wait-scale');
const waitScale = scaleAt > 0 ? Number(process.argv[scaleAt + 1]) : 1;
const run = (Date.now() % 100000000).toString(36);
const httpclient = { request: async () => { throw new Error('no HTTP name server lookup in tests'); } };
const silentLogger = { info() {}, warn() {}, debug() {}, error() {} };
const results = [];
const clientErrors = [];

function report(scenario, ok, detail, t0) {
  results.push(ok);
  process.stdout.write(JSON.stringify({ scenario, ok, detail, ms: Date.now() - t0 }) + '\n');
}

const sleep = ms => new Promise(r => setTimeout(r, ms));

function body(scenario, i) {
  return Buffer.concat([ Buffer.from(`${scenario}#${i} ünïcödé 値`), Buffer.from([ 0, 1, 0xfe, 0xff ]) ]);
}

function message(topic, scenario, tag, i) {
  const m = new Message(topic, tag, body(scenario, i));
  m.keys = [ `${scenario}-k${i}`, `alt-${i}` ];
  m.properties.scenario = scenario;
  m.properties.i = String(i);
  m.properties.note = `naïve 値 ${i}`;
  return m;
}

function damage(m, tag) {
  const p = m.properties || {};
  const i = Number(p.i);
  const bad = [];
  if (!m.body || !Buffer.from(m.body).equals(body(p.scenario, i))) bad.push('body');
  if (tag && m.tags !== tag) bad.push(`tags=${m.tags}`);
  if (m.keys !== `${p.scenario}-k${i} alt-${i}`) bad.push(`keys=${m.keys}`);
  if (p.note !== `naïve 値 ${i}`) bad.push(`note=${p.note}`);
  return bad.length ? `${p.scenario}#${i}: ${bad.join(',')}` : null;
}

function id(m) {
  return `${m.properties.scenario}#${m.properties.i}`;
}

class Collector {
  constructor(tag) {
    this.tag = tag;
    this.seen = new Map();
    this.damaged = [];
    this.all = [];
  }

  add(m) {
    const d = damage(m, this.tag);
    if (d) this.damaged.push(d);
    this.all.push(m);
    this.seen.set(id(m), (this.seen.get(id(m)) || 0) + 1);
  }

  async waitFor(n, ms) {
    const deadline = Date.now() + ms * waitScale;
    while (this.seen.size < n && Date.now() < deadline) await sleep(50);
  }

  verdict(expected) {
    const bad = [];
    const missing = expected.filter(x => !this.seen.has(x));
    const extra = [ ...this.seen.keys() ].filter(x => !expected.includes(x));
    const dup = [ ...this.seen.entries() ].filter(([ , v ]) => v > 1).map(([ k, v ]) => `${k}x${v}`);
    if (missing.length) bad.push(`missing ${missing}`);
    if (extra.length) bad.push(`unexpected ${extra}`);
    if (dup.length) bad.push(`duplicates ${dup}`);
    if (this.damaged.length) bad.push(`damaged ${this.damaged}`);
    return bad.join('; ');
  }
}

function ids(scenario, n) {
  return Array.from({ length: n }, (_, i) => `${scenario}#${i}`);
}

function producer(group) {
  const p = new Producer({ httpclient, nameSrv: namesrv, producerGroup: group, instanceName: group,
    clientIP: '127.0.0.1', logger: silentLogger });
  p.on('error', err => clientErrors.push(`producer: ${err.message}`));
  return p;
}

function consumer(group, instanceName, extra = {}) {
  const c = new Consumer(Object.assign({ httpclient, nameSrv: namesrv, consumerGroup: group, instanceName,
    clientIP: '127.0.0.1', logger: silentLogger, consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
    rebalanceInterval: 1000 }, extra));
  c.on('error', err => clientErrors.push(`consumer: ${err.message}`));
  return c;
}

// Creates `topic` (4 queues) on every master that serves TBW102, with ali-ons' own
// UPDATE_AND_CREATE_TOPIC request, and waits until the name server routes it.
async function createTopic(p, topic) {
  await p.ready();
  const client = p._mqClient;
  const route = await client.getTopicRouteInfoFromNameServer('TBW102', 3000);
  for (const bd of route.brokerDatas) {
    const addrs = bd.brokerAddrs;
    const master = addrs['0'] || addrs[0];
    await client.createTopic(master, 'TBW102', { topicName: topic, readQueueNums: 4, writeQueueNums: 4, perm: 6,
      topicFilterType: 'SINGLE_TAG', topicSysFlag: 0, order: false }, 3000);
  }
  const deadline = Date.now() + 15000 * waitScale;
  for (;;) {
    try {
      await client.getTopicRouteInfoFromNameServer(topic, 3000);
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(200);
    }
  }
}

async function sendAll(p, msgs) {
  const results = [];
  for (const m of msgs) {
    const r = await p.send(m);
    if (r.sendStatus !== 'SEND_OK') throw new Error(`send status ${r.sendStatus}`);
    results.push(r);
  }
  return results;
}

// Producer sends; push consumer gets each message once with body, tags, keys and properties intact.
async function produceConsume() {
  const t0 = Date.now();
  const topic = `OnsPC_${run}`;
  const n = 20;
  const p = producer(`ons_pg_pc_${run}`);
  await createTopic(p, topic);
  const sent = await sendAll(p, Array.from({ length: n }, (_, i) => message(topic, 'pc', 'TagA', i)));
  await p.close();
  const sendOk = sent.every(r => r.msgId && r.messageQueue && Number.isInteger(r.queueOffset));
  const col = new Collector('TagA');
  const c = consumer(`ons_cg_pc_${run}`, `pc_${run}`);
  c.subscribe(topic, '*', async msg => { col.add(msg); });
  await col.waitFor(n, 30000);
  await sleep(1000 * waitScale);
  await c.close();
  const v = col.verdict(ids('pc', n));
  report('ali-ons-producer', sendOk, sendOk ? `${n} sent, msgId/queue/offset in every result` : 'bad send results', t0);
  report('ali-ons-push-consumer', !v, v || `${n} received once each, intact`, t0);
}

// A handler that throws: ali-ons sends it back (delay level 3 + reconsumeTimes), it comes back
// with reconsumeTimes 1, fails again and lands in %DLQ%group, where another consumer finds it.
async function retryDlq() {
  const t0 = Date.now();
  const topic = `OnsRetry_${run}`;
  const group = `ons_cg_retry_${run}`;
  const p = producer(`ons_pg_retry_${run}`);
  await createTopic(p, topic);
  await sendAll(p, [ message(topic, 'fail', 'retry', 0), message(topic, 'ok', 'retry', 0) ]);
  await p.close();
  const attempts = [];
  const okCol = new Collector('retry');
  const damaged = [];
  const c = consumer(group, `retry_${run}`, { maxReconsumeTimes: 1 });
  c.subscribe(topic, '*', async msg => {
    const d = damage(msg, 'retry');
    if (d) damaged.push(`${d} (reconsumeTimes ${msg.reconsumeTimes})`);
    if (msg.properties.scenario === 'fail') {
      attempts.push(msg.reconsumeTimes);
      throw new Error('handler fails on purpose');
    }
    okCol.add(msg);
  });
  const deadline = Date.now() + 60000 * waitScale;
  while (attempts.length < 2 && Date.now() < deadline) await sleep(100);
  await sleep(2000 * waitScale);
  await c.close();
  const bad = [];
  if (JSON.stringify(attempts) !== '[0,1]') bad.push(`failing handler saw reconsumeTimes ${JSON.stringify(attempts)}, expected [0,1]`);
  const ov = okCol.verdict(ids('ok', 1));
  if (ov) bad.push(`ok message: ${ov}`);
  if (damaged.length) bad.push(`damaged ${damaged}`);
  report('ali-ons-retry', !bad.length, bad.length ? bad.join('; ') : `redelivered with reconsumeTimes ${attempts}`, t0);

  const dlq = new Collector('retry');
  const dc = consumer(`ons_dlq_reader_${run}`, `dlq_${run}`);
  dc.subscribe(`%DLQ%${group}`, '*', async msg => { dlq.add(msg); });
  await dlq.waitFor(1, 30000);
  await sleep(500);
  await dc.close();
  const dv = dlq.verdict(ids('fail', 1));
  report('ali-ons-dlq', !dv, dv || `dead letter in %DLQ%${group} intact`, t0);
}

// delayTimeLevel 2 (5 s): with the consumer already running (it got a warm-up message), a
// delayed and an undelayed message are sent together: the undelayed one comes first, the delayed
// one no sooner than 4.5 s after its send.
async function delay() {
  const t0 = Date.now();
  const topic = `OnsDelay_${run}`;
  const p = producer(`ons_pg_delay_${run}`);
  await createTopic(p, topic);
  await sendAll(p, [ message(topic, 'warm', 'delay', 0) ]);
  const arrived = {};
  const col = new Collector('delay');
  const c = consumer(`ons_cg_delay_${run}`, `delay_${run}`);
  c.subscribe(topic, '*', async msg => {
    if (!(id(msg) in arrived)) arrived[id(msg)] = Date.now();
    col.add(msg);
  });
  await col.waitFor(1, 30000);
  const d = message(topic, 'delayed', 'delay', 0);
  d.delayTimeLevel = 2;
  const sentAt = Date.now();
  await sendAll(p, [ d, message(topic, 'now', 'delay', 0) ]);
  await p.close();
  await col.waitFor(3, 40000);
  await sleep(1000 * waitScale);
  await c.close();
  const bad = [];
  const v = col.verdict([ 'warm#0', 'delayed#0', 'now#0' ]);
  if (v) bad.push(v);
  const waited = arrived['delayed#0'] ? arrived['delayed#0'] - sentAt : -1;
  if (arrived['delayed#0'] && waited < 4500) bad.push(`delayed message arrived after ${waited} ms, level 2 is 5 s`);
  if (arrived['now#0'] > arrived['delayed#0']) bad.push('the undelayed message came after the delayed one');
  report('ali-ons-delay-level', !bad.length, bad.length ? bad.join('; ') : `level 2 arrived after ${waited} ms`, t0);
}

// Two push consumers of one group: each gets a disjoint, non-empty share of the queues.
async function split() {
  const t0 = Date.now();
  const topic = `OnsSplit_${run}`;
  const group = `ons_cg_split_${run}`;
  const n = 40;
  const p = producer(`ons_pg_split_${run}`);
  await createTopic(p, topic);
  await sendAll(p, [ message(topic, 'warm', 'split', 0) ]);
  const a = new Collector('split');
  const b = new Collector('split');
  const ca = consumer(group, `split_a_${run}`);
  const cb = consumer(group, `split_b_${run}`);
  ca.subscribe(topic, '*', async msg => { a.add(msg); });
  cb.subscribe(topic, '*', async msg => { b.add(msg); });
  await ca.ready();
  await cb.ready();
  const queuesOf = c => [ ...c._processQueueTable.values() ]
    .map(x => x.messageQueue).filter(mq => mq && mq.topic === topic).map(mq => mq.queueId).sort();
  const deadline = Date.now() + 30000 * waitScale;
  let qa = [];
  let qb = [];
  while (Date.now() < deadline) {
    qa = queuesOf(ca);
    qb = queuesOf(cb);
    if (qa.length === 2 && qb.length === 2) break;
    await sleep(100);
  }
  await sendAll(p, Array.from({ length: n }, (_, i) => message(topic, 'split', 'split', i)));
  await p.close();
  const both = () => new Set([ ...a.seen.keys(), ...b.seen.keys() ]).size;
  const wait = Date.now() + 30000 * waitScale;
  while (both() < n + 1 && Date.now() < wait) await sleep(100);
  await sleep(1000 * waitScale);
  await ca.close();
  await cb.close();
  // The warm-up message may be seen twice while the queues move from the first consumer to the
  // second (at least once during a rebalance); the messages sent after it, once each.
  const merged = new Collector('split');
  a.all.concat(b.all).filter(m => m.properties.scenario === 'split').forEach(m => merged.add(m));
  const bad = [];
  const v = merged.verdict(ids('split', n));
  if (v) bad.push(v);
  const ra = new Set(a.all.filter(m => m.properties.scenario === 'split').map(m => m.queueId));
  const rb = new Set(b.all.filter(m => m.properties.scenario === 'split').map(m => m.queueId));
  const overlap = [ ...ra ].filter(q => rb.has(q));
  if (qa.length !== 2 || qb.length !== 2) bad.push(`assignment ${qa} / ${qb}, expected 2 queues each`);
  if (overlap.length || !a.seen.size || !b.seen.size) bad.push(`received from queues ${[ ...ra ]} and ${[ ...rb ]}`);
  report('ali-ons-split', !bad.length, bad.length ? bad.join('; ')
    : `queues [${qa}] and [${qb}], ${a.seen.size} + ${b.seen.size} messages`, t0);
}

const scenarios = { 'produce-consume': produceConsume, 'retry-dlq': retryDlq, delay, split };

async function main() {
  for (const [ name, fn ] of Object.entries(scenarios)) {
    if (only && !only.has(name)) continue;
    const t0 = Date.now();
    try {
      await fn();
    } catch (err) {
      report(name, false, `exception: ${err.stack}`, t0);
    }
  }
  if (clientErrors.length) process.stderr.write(`client errors: ${JSON.stringify(clientErrors.slice(0, 20))}\n`);
  process.exit(results.every(Boolean) ? 0 : 1);
}

main();
