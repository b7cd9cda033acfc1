// The Hourglass side of tests/bench/node_clients.sh: the workloads of
// tests/bench/bullmq/bench.js, driven through the Node client
// (clients/node, the npm package hourglass-broker) instead of BullMQ, with
// the same flags and the same JSON out, so that the two compare from Node.
// Each run prints one JSON object on stdout; progress goes to stderr.
//
//   node bench.js publish --addr=HOST:PORT --topic=T --count=N [--batch=B]
//       [--concurrency=C] [--payload=BYTES] [--hot-ms=H]
//     Publishes N messages keeping C calls in flight: with --batch > 1 by
//     publishBatch (one Publish call per batch), else by publish (each
//     message a request on the client's PublishStream). --hot-ms makes every
//     message due at one instant, H ms after the start; otherwise they are
//     due in an hour. Prints {"published", "seconds", "rate", "errors",
//     "hot_late_ms"}.
//
//   node bench.js worker --addr=HOST:PORT --topic=T --count=N
//       [--max-in-flight=M] [--timeout-ms=T]
//     Consumes group "bench" until N are delivered (or T ms pass with none),
//     acknowledging each (acks batched by the client). Lateness is the time
//     the message reached the loop minus its due time (one machine, one
//     clock). Prints {"delivered", "seconds", "rate", "lateness_ms": {p50,
//     p90, p99, p99_9, max}, "early"}: bench.js's fields.
'use strict';

const path = require('path');

const { Hourglass } = require(path.join(__dirname, '..', '..', '..', 'clients', 'node'));

function parseArgs(argv) {
  const args = { _: [] };
  for (const arg of argv) {
    const m = /^--([^=]+)=(.*)$/.exec(arg);
    if (m) args[m[1]] = m[2];
    else args._.push(arg);
  }
  return args;
}

function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1];
}

async function publish(args) {
  const count = Number(args.count);
  const batch = Number(args.batch || 1);
  const concurrency = Number(args.concurrency || 8);
  const payload = Buffer.alloc(Math.max(0, Number(args.payload || 100)), 'x');
  const hg = new Hourglass({ addrs: [args.addr], timeout: '60s', maxPublishesInFlight: Math.max(1000, concurrency) });
  await hg.stats(); // Connected before the clock starts, as Queue.waitUntilReady.
  const start = Date.now();
  const hotAt = args['hot-ms'] !== undefined ? new Date(start + Number(args['hot-ms'])) : undefined;
  const when = hotAt ? { deliverAt: hotAt } : { delay: '1h' };
  let next = 0;
  let published = 0;
  let errors = 0;
  let firstError = '';
  let last = start;
  const progress = setInterval(() => {
    process.stderr.write(`hourglass publish: ${published} (${Math.round(published / ((Date.now() - start) / 1000))}/s)\n`);
  }, 1000);
  async function loop() {
    for (;;) {
      const first = next;
      if (first >= count) return;
      const size = Math.min(batch, count - first);
      next += size;
      try {
        if (batch > 1) {
          const messages = [];
          for (let i = 0; i < size; ++i) messages.push({ topic: args.topic, payload, ...when });
          await hg.publishBatch(messages);
        } else {
          await hg.publish(args.topic, payload, when);
        }
        published += size;
        last = Date.now();
      } catch (e) {
        ++errors;
        if (!firstError) firstError = String(e && e.message);
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, loop));
  clearInterval(progress);
  const seconds = (last - start) / 1000;
  process.stdout.write(JSON.stringify({
    published, seconds, rate: seconds > 0 ? published / seconds : 0, errors, first_error: firstError,
    hot_late_ms: hotAt ? Math.max(0, last - hotAt.getTime()) : 0,
  }) + '\n');
  await hg.close();
}

async function worker(args) {
  const count = Number(args.count);
  const timeoutMs = Number(args['timeout-ms'] || 120000);
  const hg = new Hourglass({ addrs: [args.addr], timeout: '60s' });
  const sub = hg.subscribe(args.topic, 'bench', { maxInFlight: Number(args['max-in-flight'] || 5000) });
  await sub.ready;
  process.stderr.write('hourglass worker: ready\n');
  const lateness = new Float64Array(count);
  let delivered = 0;
  let early = 0;
  let first = 0;
  let last = 0;
  const start = Date.now();
  let lastProgress = start;
  const progress = setInterval(() => {
    process.stderr.write(`hourglass worker: ${delivered} delivered\n`);
    if (Date.now() - lastProgress > timeoutMs) void sub.close();
  }, 1000);
  for await (const m of sub) {
    const now = Date.now();
    const late = now - m.deliverAt.getTime();
    if (late < 0) ++early;
    if (delivered < count) lateness[delivered] = Math.max(0, late);
    ++delivered;
    if (!first) first = now;
    last = now;
    lastProgress = now;
    void m.ack(); // Batched: every ack of this turn of the event loop in one request.
    if (delivered >= count) break;
  }
  clearInterval(progress);
  await hg.close();
  const n = Math.min(delivered, count);
  const sorted = Array.from(lateness.subarray(0, n)).sort((a, b) => a - b);
  const seconds = (last - first) / 1000;
  process.stdout.write(JSON.stringify({
    delivered, seconds, rate: seconds > 0 ? delivered / seconds : 0,
    lateness_ms: {
      p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99),
      p99_9: percentile(sorted, 99.9), max: n ? sorted[n - 1] : 0,
    },
    early, waited_seconds: (Date.now() - start) / 1000,
  }) + '\n');
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args._[0] === 'publish') return publish(args);
  if (args._[0] === 'worker') return worker(args);
  process.stderr.write('usage: node bench.js publish|worker --addr=HOST:PORT --topic=T --count=N ...\n');
  process.exit(2);
}

main().then(() => process.exit(0), (e) => {
  process.stderr.write(`bench.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
