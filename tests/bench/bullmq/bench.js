// The BullMQ side of tests/bench/compare.sh: the same workloads as
// `hourglass bench`, against BullMQ on Redis. Each run prints one JSON
// object on stdout; progress goes to stderr.
//
//   node bench.js publish --port=P --queue=Q --count=N [--batch=B]
//       [--concurrency=C] [--payload=BYTES] [--delay-ms=D | --delay-ms=MIN..MAX
//       | --hot-ms=H] [--rate=R]
//     Adds N delayed jobs: with --batch > 1 by Queue.addBulk, else by
//     Queue.add, keeping C calls in flight, paced to R jobs/s if given.
//     --hot-ms makes every job due at one instant, H ms after the start.
//     Prints {"published", "seconds", "rate", "hot_late_ms"}.
//
//   node bench.js worker --port=P --queue=Q --count=N [--concurrency=C]
//       [--timeout-ms=T]
//     Processes jobs until N are done (or T ms pass with none), acking each
//     (removeOnComplete) as hourglass bench acks. Lateness is the time the
//     processor starts minus the job's due time (its timestamp plus delay,
//     carried in its data), on the producer's clock (one machine). Prints {"delivered",
//     "seconds", "rate", "lateness_ms": {p50, p90, p99, p99_9, max},
//     "early"}.
'use strict';

const { Queue, Worker } = require('bullmq');

function parseArgs(argv) {
  const args = { _: [] };
  for (const arg of argv) {
    const m = /^--([^=]+)=(.*)$/.exec(arg);
    if (m) {
      args[m[1]] = m[2];
    } else {
      args._.push(arg);
    }
  }
  return args;
}

function connection(args) {
  // maxRetriesPerRequest null: what BullMQ asks of a worker's connection.
  return { host: '127.0.0.1', port: Number(args.port), maxRetriesPerRequest: null };
}

function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1];
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function publish(args) {
  const queue = new Queue(args.queue, { connection: connection(args) });
  await queue.waitUntilReady();
  const count = Number(args.count);
  const batch = Number(args.batch || 1);
  const concurrency = Number(args.concurrency || 8);
  const rate = Number(args.rate || 0);
  const payload = 'x'.repeat(Math.max(0, Number(args.payload || 100)));
  let minDelay = 0;
  let maxDelay = 0;
  if (args['delay-ms'] !== undefined) {
    const [lo, hi] = String(args['delay-ms']).split('..');
    minDelay = Number(lo);
    maxDelay = hi === undefined ? minDelay : Number(hi);
  }
  const start = Date.now();
  const hotAt = args['hot-ms'] !== undefined ? start + Number(args['hot-ms']) : 0;
  // A job's due time is its timestamp plus its delay. BullMQ sets the delay
  // to 0 when it promotes the job, so the due time travels in the job's data.
  const job = (seq) => {
    const timestamp = Date.now();
    const delay = hotAt
      ? Math.max(0, hotAt - timestamp)
      : minDelay + Math.floor(Math.random() * (maxDelay - minDelay + 1));
    return {
      name: 'm',
      data: { seq, due: timestamp + delay, payload },
      opts: { timestamp, delay, removeOnComplete: true, removeOnFail: true },
    };
  };

  let next = 0;
  let published = 0;
  let errors = 0;
  let firstError = '';
  let last = Date.now();
  const progress = setInterval(() => {
    process.stderr.write(`bullmq publish: ${published} (${Math.round(published / ((Date.now() - start) / 1000))}/s)\n`);
  }, 1000);

  async function loop() {
    for (;;) {
      const first = next;
      if (first >= count) return;
      const size = Math.min(batch, count - first);
      next += size;
      if (rate > 0) {
        const sendAt = start + (first / rate) * 1000;
        const wait = sendAt - Date.now();
        if (wait > 0) await sleep(wait);
      }
      try {
        if (batch > 1) {
          const jobs = [];
          for (let i = 0; i < size; ++i) jobs.push(job(first + i));
          await queue.addBulk(jobs);
        } else {
          const { name, data, opts } = job(first);
          await queue.add(name, data, opts);
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
  process.stdout.write(
    JSON.stringify({
      published,
      seconds,
      rate: seconds > 0 ? published / seconds : 0,
      errors,
      first_error: firstError,
      // How long after the hot instant publishing ended (0: before it).
      hot_late_ms: hotAt ? Math.max(0, last - hotAt) : 0,
    }) + '\n',
  );
  await queue.close();
}

async function worker(args) {
  const count = Number(args.count);
  const timeoutMs = Number(args['timeout-ms'] || 120000);
  const lateness = new Float64Array(count);
  let delivered = 0;
  let early = 0;
  let first = 0;
  let last = 0;
  let lastProgress = Date.now();
  let resolveDone;
  const done = new Promise((resolve) => (resolveDone = resolve));

  const w = new Worker(
    args.queue,
    async (job) => {
      const now = Date.now();
      const due = job.data.due;
      const late = now - due;
      if (late < 0) ++early;
      if (delivered < count) lateness[delivered] = Math.max(0, late);
      ++delivered;
      if (!first) first = now;
      last = now;
      lastProgress = now;
      if (delivered >= count) resolveDone();
    },
    {
      connection: connection(args),
      concurrency: Number(args.concurrency || 100),
      removeOnComplete: { count: 0 },
      removeOnFail: { count: 0 },
    },
  );
  await w.waitUntilReady();
  process.stderr.write('bullmq worker: ready\n');
  const start = Date.now();
  const progress = setInterval(() => {
    process.stderr.write(`bullmq worker: ${delivered} delivered\n`);
    if (Date.now() - lastProgress > timeoutMs) resolveDone();
  }, 1000);
  await done;
  clearInterval(progress);
  await w.close();
  const n = Math.min(delivered, count);
  const sorted = Array.from(lateness.subarray(0, n)).sort((a, b) => a - b);
  const seconds = (last - first) / 1000;
  process.stdout.write(
    JSON.stringify({
      delivered,
      seconds,
      rate: seconds > 0 ? delivered / seconds : 0,
      lateness_ms: {
        p50: percentile(sorted, 50),
        p90: percentile(sorted, 90),
        p99: percentile(sorted, 99),
        p99_9: percentile(sorted, 99.9),
        max: n ? sorted[n - 1] : 0,
      },
      early,
      waited_seconds: (Date.now() - start) / 1000,
    }) + '\n',
  );
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const command = args._[0];
  if (command === 'publish') return publish(args);
  if (command === 'worker') return worker(args);
  process.stderr.write('usage: node bench.js publish|worker --port=P --queue=Q --count=N ...\n');
  process.exit(2);
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`bench.js: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
  },
);
