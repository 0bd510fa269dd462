'use strict';
// Reads every CommitLog file of a directory with ali-ons' own message decoder
// (lib/message/message_decoder.js, the one its consumers run over pulled records) and prints
// one JSON object per record on stdout.
//
// The walk is CommitLog recovery's: records back to back, a blank magic ends a file, a zero
// totalSize ends the log. ali-ons only knows the v1 layout (1-byte topic length) with IPv4 hosts,
// so a v2-magic record and one with an IPv6 host are reported as {"skipped": ...} instead of
// being handed to the decoder (which would misread them). Files are read record by record:
// CommitLog files are 1 GiB and sparse, most of it never written.
// Usage: node decode_commitlog.js COMMITLOG_DIR

const fs = require('fs');
const path = require('path');
const ByteBuffer = require('byte');
const decoder = require('ali-ons/lib/message/message_decoder');

const MAGIC_V1 = -626843481;
const MAGIC_V2 = -626843477;
const BLANK = -875286124;
const V6_FLAGS = 0x10 | 0x20; // BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG

// One record's bytes as the JSON line to print; `error` set when ali-ons cannot read it.
function decodeOne(buf, offset) {
  const magic = buf.readInt32BE(4);
  if (magic === MAGIC_V2) return { skipped: 'v2 magic (ali-ons decodes v1 records only)', offset };
  if (magic !== MAGIC_V1) return { error: `bad magic ${magic}`, offset };
  if ((buf.readInt32BE(36) & V6_FLAGS) !== 0) return { skipped: 'IPv6 host (ali-ons reads IPv4 only)', offset };
  const bb = ByteBuffer.wrap(buf);
  const m = decoder.decode(bb, true, true);
  if (!m) return { error: 'ali-ons decode returned null', offset };
  if (bb.position() !== buf.length) return { error: `decoder consumed ${bb.position()} of ${buf.length}`, offset };
  return {
    topic: m.topic,
    queueId: m.queueId,
    queueOffset: m.queueOffset,
    commitLogOffset: m.commitLogOffset,
    storeSize: m.storeSize,
    bodyCRC: m.bodyCRC,
    flag: m.flag,
    sysFlag: m.sysFlag,
    bornTimestamp: m.bornTimestamp,
    bornHost: m.bornHost,
    storeTimestamp: m.storeTimestamp,
    storeHost: m.storeHost,
    reconsumeTimes: m.reconsumeTimes,
    preparedTransactionOffset: m.preparedTransactionOffset,
    msgId: m.msgId,
    tags: m.tags,
    keys: m.keys === undefined ? null : m.keys,
    properties: m.properties,
    bodyBase64: (m.body || Buffer.alloc(0)).toString('base64'),
  };
}

function main(dir) {
  const files = fs.readdirSync(dir).filter(n => /^\d{20}$/.test(n)).sort();
  const out = [];
  let problems = 0;
  const head = Buffer.alloc(8);
  outer:
  for (const name of files) {
    const base = Number(name);
    const fd = fs.openSync(path.join(dir, name), 'r');
    const fileSize = fs.fstatSync(fd).size;
    try {
      let pos = 0;
      while (pos + 8 <= fileSize) {
        fs.readSync(fd, head, 0, 8, pos);
        const total = head.readInt32BE(0);
        const magic = head.readInt32BE(4);
        const offset = base + pos;
        if (magic === BLANK) {
          out.push({ blank: offset, size: total });
          break;
        }
        if (total === 0 && magic === 0) break outer;
        if (total < 8 || pos + total > fileSize) {
          out.push({ error: `bad totalSize ${total}`, offset });
          problems++;
          break outer;
        }
        const buf = Buffer.alloc(total);
        fs.readSync(fd, buf, 0, total, pos);
        const rec = decodeOne(buf, offset);
        out.push(rec);
        if (rec.error) {
          problems++;
          break outer;
        }
        pos += total;
      }
    } finally {
      fs.closeSync(fd);
    }
  }
  process.stdout.write(out.map(o => JSON.stringify(o)).join('\n') + (out.length ? '\n' : ''));
  process.exitCode = problems ? 1 : 0;
}

main(process.argv[2]);
