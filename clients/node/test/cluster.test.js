'use strict';
// Cluster mode against a real etcd and three hourglassd nodes of one shard:
// calls through any node go to the primary (the hourglass-primary redirect),
// and when the primary is killed during a publish loop the client finds the
// new one from the cluster map, and nothing it was told was stored is lost.

const assert = require('node:assert/strict');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const { after, before, test } = require('node:test');
const { Hourglass, HourglassError, status } = require('..');
const { services } = require('../dist/proto');
const { Daemon, Etcd, WAIT, eventually, prng, tempDir, writePrivate } = require('./helpers');

const ASK_TIMEOUT = 2000;
let directory;
let etcd;
const nodes = {};
const killed = new Set();

/** A raw call to one node (no redirect followed): [code, trailers, response]. */
function ask(node, service, method, request = {}) {
  const Service = services()[service];
  const client = new Service(node.address, grpc.credentials.createInsecure());
  return new Promise((resolve) => {
    const call = client[method](request, { deadline: new Date(Date.now() + ASK_TIMEOUT) }, (err, response) => {
      client.close();
      if (err) resolve([err.code, err.metadata ? err.metadata.getMap() : {}, undefined]);
      else resolve([status.OK, {}, response]);
    });
    void call;
  });
}

async function startNode(id) {
  const secret = path.join(directory, 'peer-secret');
  const node = new Daemon(path.join(directory, id), [`--etcd=${etcd.endpoint}`, `--node_id=${id}`, '--lease_ttl=2s',
    `--peer_token_file=${secret}`, '--shards=1']);
  nodes[id] = node;
  await node.start();
}

/** Waits until one of `candidates` serves (GetStats OK) and every one of `watchers` maps it primary at `epoch`. */
async function awaitPrimary(candidates, watchers, epoch) {
  let serving = [];
  await eventually(async () => {
    const codes = await Promise.all(candidates.map((n) => ask(nodes[n], 'Admin', 'GetStats')));
    serving = candidates.filter((n, i) => codes[i][0] === status.OK);
    return serving.length > 0;
  }, `one of ${candidates} serves`);
  assert.equal(serving.length, 1, `two primaries: ${serving}`);
  const primary = serving[0];
  await eventually(async () => {
    const maps = await Promise.all(watchers.map((n) => ask(nodes[n], 'Cluster', 'GetClusterMap')));
    return maps.every(([code, , m]) => code === status.OK && m.shards.length === 1 && m.shards[0].epoch === epoch
      && m.shards[0].primary === primary);
  }, `${watchers} see ${primary} primary at epoch ${epoch}`);
  return primary;
}

before(async () => {
  directory = tempDir('cluster');
  writePrivate(path.join(directory, 'peer-secret'), 'node-test-peer-secret-0123456789abcdef\n');
  etcd = new Etcd(path.join(directory, 'etcd'));
  await etcd.start();
  for (const id of ['a', 'b', 'c']) await startNode(id);
  // The shard is made once all three joined, with the first id as its primary.
  assert.equal(await awaitPrimary(['a', 'b', 'c'], ['a', 'b', 'c'], 1), 'a');
});

after(async () => {
  const codes = {};
  for (const [id, node] of Object.entries(nodes)) if (!killed.has(id)) codes[id] = await node.stop();
  await etcd?.stop();
  for (const [id, code] of Object.entries(codes)) {
    assert.equal(code, 0, `node ${id} exited ${code}:\n${nodes[id].output()}`);
  }
});

test('calls through any node go to the primary', async () => {
  const [code, trailers] = await ask(nodes.b, 'Admin', 'GetStats');
  assert.equal(code, status.UNAVAILABLE);
  assert.deepEqual([trailers['hourglass-primary'], trailers['hourglass-epoch']], [nodes.a.address, '1']);

  const hg = new Hourglass({ addrs: [nodes.b.address], timeout: WAIT });
  try {
    const r = await hg.publish('redirected', 'x', { delay: '5m', id: 'o1' });
    assert.deepEqual([r.id, r.duplicate], ['o1', false]);
    const batch = await hg.publishBatch([{ topic: 'redirected', payload: 'y', delay: '5m', id: 'o2' }]);
    assert.deepEqual(batch.map((x) => x.id), ['o2']);
    assert.equal(hg.currentAddress, nodes.a.address);
    const [, , stats] = await ask(nodes.a, 'Admin', 'GetStats', { topic: 'redirected' });
    assert.equal(stats.topics[0].scheduled, 2);
    // The primary's answers keep their codes and messages.
    assert.deepEqual(await hg.cancel('redirected', 'nope'), { cancelled: false });
    await assert.rejects(hg.publish('a b', 'x', { id: 'o9' }), (e) => e instanceof HourglassError
      && e.code === status.INVALID_ARGUMENT && e.details === 'message 0: topic "a b" has a space');
    const sub = hg.subscribe('redirected', 'g');
    await sub.ready;
    assert.equal(sub.reconnects, 0);
    await sub.close();
  } finally {
    await hg.close();
  }
});

test('the primary killed during a publish loop: nothing acknowledged is lost', async () => {
  const seed = Number(process.env.HOURGLASS_TEST_SEED || Date.now() % 1_000_000);
  console.log(`cluster publish loop: seed ${seed} (HOURGLASS_TEST_SEED=${seed} repeats it)`);
  const addrs = [nodes.b.address, nodes.c.address, nodes.a.address];
  const producer = new Hourglass({ addrs, timeout: WAIT, backoff: { initial: 20, max: 500 } });
  const consumer = new Hourglass({ addrs, timeout: WAIT, backoff: { initial: 20, max: 500 } });
  try {
    await publishLoop(producer, consumer, prng(seed));
  } finally {
    // Also after a failure: open clients would keep the process alive.
    await Promise.all([consumer.close(), producer.close()]);
  }
});

async function publishLoop(producer, consumer, random) {
  const delivered = new Set();
  const sub = consumer.subscribe('loop', 'g', { maxInFlight: 500, ackTimeout: '10s' });
  const reading = (async () => {
    for await (const m of sub) {
      delivered.add(m.id);
      await m.ack();
    }
  })();
  await sub.ready;

  const acknowledged = new Map(); // id -> receipt
  const failed = [];
  const total = 600;
  const killAt = 150;
  let next = 0;
  let killing;
  const worker = async () => {
    while (next < total) {
      const n = next++;
      const id = `m-${String(n).padStart(4, '0')}`;
      const delay = Math.floor(random() * 300);
      try {
        const r = await producer.publish('loop', Buffer.alloc(1 + Math.floor(random() * 64), n % 256), { delay, id });
        assert.equal(r.id, id);
        acknowledged.set(id, r);
      } catch (e) {
        failed.push(`${id}: ${e.message}`);
      }
      if (acknowledged.size === killAt && !killing) {
        killed.add('a');
        killing = nodes.a.kill();
      }
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  await killing;
  assert.deepEqual(failed, [], 'publishes with ids are retried across the failover');
  assert.equal(acknowledged.size, total);
  assert.ok(producer.publishRetries >= 1, 'some publishes went again to the new primary');
  const primary = await awaitPrimary(['b', 'c'], ['b', 'c'], 2);
  assert.equal(producer.currentAddress, nodes[primary].address);

  // Every message the broker acknowledged is delivered (at least once).
  await eventually(() => [...acknowledged.keys()].every((id) => delivered.has(id)),
    `all ${total} delivered (${delivered.size} so far)`);
  assert.deepEqual([...delivered].sort(), [...acknowledged.keys()].sort());
  assert.ok(sub.reconnects >= 1);
  await sub.close();
  await reading;
}
