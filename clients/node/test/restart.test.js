'use strict';
// The broker killed (SIGKILL) and restarted on its port and data: the
// subscription reopens its stream by itself and what it had not acknowledged
// comes again; publishes with ids sent meanwhile are retried until they are
// stored; one without an id fails UNAVAILABLE.

const assert = require('node:assert/strict');
const { after, before, test } = require('node:test');
const { Hourglass, HourglassError, status } = require('..');
const { WAIT, eventually, ids, startDaemon, take } = require('./helpers');

let daemon;

before(async () => { daemon = await startDaemon([], 'restart', { restartable: true }); });
after(async () => { if (daemon) assert.equal(await daemon.stop(), 0, daemon.output()); });

test('a subscription and publishes with ids live through a broker crash and restart', async () => {
  const hg = new Hourglass({ addrs: [daemon.address], timeout: WAIT, backoff: { initial: 20, max: 200 } });
  try {
    await crashAndRestart(hg);
  } finally {
    await hg.close(); // Also after a failure: a subscription left open would keep the process alive.
  }
});

async function crashAndRestart(hg) {
  const sub = hg.subscribe('crash', 'g', { ackTimeout: '30s' });
  await sub.ready;
  await hg.publishBatch([{ topic: 'crash', payload: 'a', id: 'a' }, { topic: 'crash', payload: 'b', id: 'b' }]);
  const [a, b] = await take(sub, 2);
  assert.deepEqual(ids([a, b]), ['a@1', 'b@1']);
  assert.equal(await a.ack(), true);
  await eventually(async () => (await hg.stats('crash')).topics[0].inFlight === 1, 'the ack of a took');

  await daemon.kill();
  // Both in flight while the broker is down: the one with an id waits for it.
  const withId = hg.publish('crash', 'c', { id: 'c' });
  const withoutId = hg.publish('crash', 'no id');
  await assert.rejects(withoutId, (e) => e instanceof HourglassError && e.code === status.UNAVAILABLE);
  await daemon.start();

  const receipt = await withId;
  assert.deepEqual([receipt.id, receipt.duplicate], ['c', false]);
  assert.ok(hg.publishRetries >= 1);
  // b was in flight at the crash: due again, with its next attempt; then c.
  const got = await take(sub, 2);
  assert.deepEqual(ids(got), ['b@2', 'c@1']);
  assert.deepEqual(got.map((m) => m.payload.toString()), ['b', 'c']);
  assert.equal(await b.ack(), false, 'the first delivery of b is of a stream that broke');
  assert.deepEqual(await Promise.all(got.map((m) => m.ack())), [true, true]);
  assert.ok(sub.reconnects >= 1);
  assert.equal(sub.closed, false);
  await eventually(async () => {
    const t = (await hg.stats('crash')).topics[0];
    return t.inFlight === 0 && t.ready === 0;
  }, 'every message acknowledged');
  await sub.close();
  assert.equal(sub.closed, true);
  assert.equal(sub.error, undefined);
}
