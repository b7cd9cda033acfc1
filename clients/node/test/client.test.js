'use strict';
// The client against one real hourglassd: publishing (delays, ids, batches),
// cancel and reschedule, consuming (ack, nack, ack timeout, consume), and the
// Admin calls.

const assert = require('node:assert/strict');
const { after, before, describe, test } = require('node:test');
const { Hourglass, HourglassError, status } = require('..');
const { WAIT, eventually, ids, startDaemon, take } = require('./helpers');

let daemon;
let hg;

before(async () => {
  // Three attempts, so that dead letters come fast.
  daemon = await startDaemon(['--max_attempts=3']);
  hg = new Hourglass({ addrs: [daemon.address], timeout: WAIT });
});

after(async () => {
  await hg?.close();
  if (daemon) assert.equal(await daemon.stop(), 0, daemon.output());
});

/** Whether the broker still holds message `id` of `topic`, in any state. */
async function stored(topic, id) {
  try {
    await hg.show(topic, id);
    return true;
  } catch (e) {
    if (e instanceof HourglassError && e.code === status.NOT_FOUND) return false;
    throw e;
  }
}

async function rejects(promise, code, details) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof HourglassError, `not an HourglassError: ${e}`);
    assert.equal(e.codeName, Object.keys(status).find((k) => status[k] === code));
    assert.equal(e.code, code);
    if (details !== undefined) assert.equal(e.details, details);
    return true;
  });
}

describe('publish', () => {
  test('delayed messages come due in due order and never early', async () => {
    const sub = hg.subscribe('delays', 'g');
    await sub.ready;
    const before = Date.now();
    const receipts = await Promise.all([
      hg.publish('delays', Buffer.from('four'), { delay: 400, id: 'd-400', headers: { k: 'v' } }),
      hg.publish('delays', 'one', { delay: '100ms', id: 'd-100' }),
      hg.publish('delays', 'three', { deliverAt: new Date(before + 300), id: 'd-300' }),
      hg.publish('delays', 'two', { delay: '0.2s', id: 'd-200' }),
      hg.publish('delays', 'zero', { id: 'd-0' }),
    ]);
    const afterPublish = Date.now();
    assert.deepEqual(receipts.map((r) => [r.id, r.duplicate]),
      [['d-400', false], ['d-100', false], ['d-300', false], ['d-200', false], ['d-0', false]]);
    const [r400, r100, r300, r200, r0] = receipts;
    assert.ok(r400.deliverAt instanceof Date);
    assert.ok(r400.deliverAt.getTime() >= before + 400 && r400.deliverAt.getTime() <= afterPublish + 400);
    assert.equal(r300.deliverAt.getTime(), before + 300);
    assert.ok(r0.deliverAt.getTime() >= before - 1 && r0.deliverAt.getTime() <= afterPublish);
    const got = await take(sub, 5);
    assert.deepEqual(ids(got), ['d-0@1', 'd-100@1', 'd-200@1', 'd-300@1', 'd-400@1']);
    assert.deepEqual(got.map((m) => m.deliverAt.getTime()),
      [r0, r100, r200, r300, r400].map((r) => r.deliverAt.getTime()));
    assert.deepEqual(got.map((m) => m.payload.toString()), ['zero', 'one', 'two', 'three', 'four']);
    assert.deepEqual(got[4].headers, { k: 'v' });
    assert.equal(got[4].topic, 'delays');
    assert.ok(Buffer.isBuffer(got[4].payload));
    assert.deepEqual(await Promise.all(got.map((m) => m.ack())), [true, true, true, true, true]);
    await sub.close();
  });

  test('ids are deduplicated: the first receipt again, nothing stored twice', async () => {
    const first = await hg.publish('dedup', 'a', { delay: '1h', id: 'order-1' });
    const again = await hg.publish('dedup', 'b', { delay: '2h', id: 'order-1' });
    assert.deepEqual([first.id, first.duplicate], ['order-1', false]);
    assert.deepEqual(again, { id: 'order-1', deliverAt: first.deliverAt, duplicate: true });
    const batch = await hg.publishBatch([
      { topic: 'dedup', payload: 'c', delay: '1h', id: 'order-1' },
      { topic: 'dedup', payload: 'd', delay: '1h', id: 'order-2' },
    ]);
    assert.deepEqual(batch.map((r) => [r.id, r.duplicate]), [['order-1', true], ['order-2', false]]);
    assert.equal(batch[0].deliverAt.getTime(), first.deliverAt.getTime());
    const page = await hg.list('dedup', 'scheduled');
    assert.deepEqual(page.messages.map((m) => m.id), ['order-1', 'order-2']);
    assert.equal(page.nextPageToken, undefined);
    const shown = await hg.show('dedup', 'order-1');
    assert.equal(shown.payloadPreview.toString(), 'a');
    assert.equal(shown.state, 'scheduled');
  });

  test('a broker-assigned id when none is given; a bad message is refused with its reason', async () => {
    const r = await hg.publish('assigned', 'x', { delay: '1h' });
    assert.match(r.id, /^hg-[0-9a-f]{16}$/);
    await rejects(hg.publish('a b', 'x'), status.INVALID_ARGUMENT, 'message 0: topic "a b" has a space');
    await rejects(hg.publish('assigned', 'x', { delay: -5 }), status.INVALID_ARGUMENT);
    await assert.rejects(hg.publish('assigned', 'x', { delay: '5 parsecs' }), TypeError);
    await assert.rejects(hg.publish('assigned', 'x', { delay: 5, deliverAt: new Date() }), TypeError);
  });

  test('a batch is stored all or nothing, receipts in order', async () => {
    await rejects(hg.publishBatch([
      { topic: 'batch', payload: 'ok', id: 'b-0', delay: '1h' },
      { topic: 'a b', payload: 'bad', id: 'b-1' },
    ]), status.INVALID_ARGUMENT, 'message 1: topic "a b" has a space');
    assert.deepEqual((await hg.list('batch', 'scheduled')).messages, []);
    const rs = await hg.publishBatch([
      { topic: 'batch', payload: 'x', delay: 5000 },
      { topic: 'batch', payload: 'y', delay: '1h', id: 'b-2' },
      { topic: 'batch2', payload: 'z', deliverAt: new Date(Date.now() + 3_600_000), id: 'b-3' },
    ]);
    assert.equal(rs.length, 3);
    assert.match(rs[0].id, /^hg-/);
    assert.deepEqual(rs.slice(1).map((r) => r.id), ['b-2', 'b-3']);
    assert.deepEqual((await hg.list('batch', 'scheduled')).messages.map((m) => m.id), [rs[0].id, 'b-2']);
    await rejects(hg.publishBatch([]), status.INVALID_ARGUMENT);
  });

  test('many publishes in flight at once on the stream', async () => {
    const n = 500;
    const receipts = await Promise.all(Array.from({ length: n }, (_, i) =>
      hg.publish('many', `p${i}`, { delay: '1h', id: `many-${String(i).padStart(4, '0')}` })));
    assert.deepEqual(receipts.map((r) => r.id), Array.from({ length: n }, (_, i) => `many-${String(i).padStart(4, '0')}`));
    assert.ok(receipts.every((r) => !r.duplicate));
    const stats = await hg.stats('many');
    assert.equal(stats.topics[0].scheduled, n);
    assert.equal(hg.publishRetries, 0);
  });
});

/** `date` as the broker writes times in its errors (RFC 3339, no trailing zeros of the fraction, +00:00). */
function rfc3339(date) {
  return date.toISOString().replace(/\.?0*Z$/, '+00:00');
}

describe('deadlines', () => {
  test('a message past its deadline is never delivered: dropped, or dead-lettered to <topic>.dlq', async () => {
    const sub = hg.subscribe('offers', 'g', { maxInFlight: 1 });
    const dlq = hg.subscribe('offers.dlq', 'g');
    const clock = hg.subscribe('clock', 'g');
    await Promise.all([sub.ready, dlq.ready, clock.ready]);
    await hg.publish('offers', 'held', { id: 'held' });
    const [held] = await take(sub); // The group's only credit, until it is acked.

    const dropped = await hg.publish('offers', 'late', { id: 'dropped', ttl: '300ms' });
    // Ahead enough that the batch cannot arrive after it on a loaded machine (it would be refused).
    const expireAt = new Date(Date.now() + 1000);
    await hg.publishBatch([
      { topic: 'offers', payload: 'late too', id: 'lettered', expireAt, onExpire: 'dead_letter' },
      { topic: 'offers', payload: 'next', id: 'next', ttl: 3_600_000, onExpire: 'drop' },
    ]);
    // A ttl counts from the broker's acceptance: for a message due now, its due time (both in ms).
    const deadline = Math.max(dropped.deliverAt.getTime() + 300, expireAt.getTime());
    const tick = await hg.publish('clock', 'tick', { deliverAt: new Date(deadline + 1) });
    assert.deepEqual(ids(await take(clock)), [`${tick.id}@1`]);
    assert.equal(await held.ack(), true);

    // Both were due before "next": delivered, they would come first.
    const [next] = await take(sub);
    assert.deepEqual([next.id, next.payload.toString(), next.attempt], ['next', 'next', 1]);
    const [letter] = await take(dlq);
    assert.deepEqual([letter.id, letter.topic, letter.payload.toString()], ['lettered', 'offers.dlq', 'late too']);
    // "dropped" left its group without a letter.
    assert.deepEqual((await hg.list('offers', 'dead')).messages.map((m) => m.id), ['lettered']);
    assert.deepEqual(await Promise.all([next.ack(), letter.ack()]), [true, true]);
    await Promise.all([sub.close(), dlq.close(), clock.close()]);
  });

  test('a deadline not after the due time is the broker\'s INVALID_ARGUMENT; two deadlines the client\'s TypeError', async () => {
    await rejects(hg.publish('offers2', 'x', { delay: '2s', ttl: '1s' }), status.INVALID_ARGUMENT,
      "message 0: ttl 1s is not longer than the message's delay 2s: it would expire before it comes due");
    const at = new Date(Date.now() + 3_600_000);
    await rejects(hg.publishBatch([
      { topic: 'offers2', payload: 'ok', deliverAt: at, expireAt: new Date(at.getTime() + 1) },
      { topic: 'offers2', payload: 'x', deliverAt: at, expireAt: at, onExpire: 'dead_letter' },
    ]), status.INVALID_ARGUMENT,
    `message 1: expire_at ${rfc3339(at)} is not after the message's due time ${rfc3339(at)}: it would expire before it comes due`);
    assert.deepEqual((await hg.list('offers2', 'scheduled')).messages, []);

    await assert.rejects(hg.publish('offers2', 'x', { ttl: '1h', expireAt: at }),
      { name: 'TypeError', message: 'publish: give ttl or expireAt, not both' });
    await assert.rejects(hg.publishBatch([{ topic: 'offers2' }, { topic: 'offers2', ttl: 5, expireAt: at }]),
      { name: 'TypeError', message: 'publishBatch: message 1: give ttl or expireAt, not both' });
    await assert.rejects(hg.publish('offers2', 'x', { ttl: '1h', onExpire: 'keep' }),
      { name: 'TypeError', message: 'publish: onExpire must be \'drop\' or \'dead_letter\', not "keep"' });
    await assert.rejects(hg.publish('offers2', 'x', { ttl: '5 parsecs' }), TypeError);
    await assert.rejects(hg.publish('offers2', 'x', { expireAt: Date.now() }),
      { name: 'TypeError', message: 'publish: expireAt must be a Date' });
  });
});

describe('cancel and reschedule', () => {
  test('a cancelled message is never delivered; a second cancel finds none', async () => {
    const sub = hg.subscribe('cancel', 'g');
    await sub.ready;
    await hg.publish('cancel', 'x', { delay: '200ms', id: 'c-1' });
    await hg.publish('cancel', 'y', { delay: '300ms', id: 'c-2' });
    assert.deepEqual(await hg.cancel('cancel', 'c-1'), { cancelled: true });
    assert.deepEqual(await hg.cancel('cancel', 'c-1'), { cancelled: false });
    assert.deepEqual(await hg.cancel('cancel', 'never'), { cancelled: false });
    await rejects(hg.cancel('a b', 'x'), status.INVALID_ARGUMENT);
    // c-2, due after c-1 would have been, comes alone.
    const [m] = await take(sub, 1);
    assert.deepEqual(ids([m]), ['c-2@1']);
    assert.equal(await m.ack(), true);
    assert.equal(await sub.receive(0), undefined);
    await sub.close();
  });

  test('reschedule moves a message to its new due time', async () => {
    const sub = hg.subscribe('resched', 'g');
    await sub.ready;
    const first = await hg.publish('resched', 'late', { delay: '1h', id: 'r-1' });
    await hg.publish('resched', 'marker', { delay: '2h', id: 'r-2' });
    const before = Date.now();
    const moved = await hg.reschedule('resched', 'r-1', { delay: '150ms' });
    assert.equal(moved.id, 'r-1');
    assert.equal(moved.duplicate, false);
    assert.ok(moved.deliverAt.getTime() >= before + 150 && moved.deliverAt < first.deliverAt);
    const at = new Date(Date.now() + 7_200_000);
    const movedMarker = await hg.reschedule('resched', 'r-2', { deliverAt: at });
    assert.equal(movedMarker.deliverAt.getTime(), at.getTime());
    const [m] = await take(sub, 1);
    assert.deepEqual(ids([m]), ['r-1@1']);
    assert.equal(m.deliverAt.getTime(), moved.deliverAt.getTime());
    await m.ack();
    await rejects(hg.reschedule('resched', 'r-1', { delay: '1m' }), status.NOT_FOUND);
    await assert.rejects(hg.reschedule('resched', 'r-2', {}), TypeError);
    await sub.close();
  });
});

describe('consuming', () => {
  test('ack, nack with a delay, and redelivery after the ack timeout', async () => {
    const sub = hg.subscribe('acks', 'g', { maxInFlight: 10, ackTimeout: '500ms' });
    await sub.ready;
    await hg.publishBatch([{ topic: 'acks', payload: '1', id: 'a-1' }, { topic: 'acks', payload: '2', id: 'a-2' }]);
    const [m1, m2] = await take(sub, 2);
    assert.deepEqual(ids([m1, m2]), ['a-1@1', 'a-2@1']);
    assert.equal(await m1.ack(), true);
    assert.equal(await m1.ack(), false); // Settled already.
    const nackedAt = Date.now();
    assert.equal(await m2.nack({ delay: '300ms' }), true);
    const [again] = await take(sub, 1);
    assert.deepEqual(ids([again]), ['a-2@2']);
    assert.ok(again.receivedAt.getTime() >= nackedAt + 300, 'the nack delay was kept');
    // Not acknowledged: it comes again after the 500 ms ack timeout.
    const [third] = await take(sub, 1);
    assert.deepEqual(ids([third]), ['a-2@3']);
    // Handed out again at least 300 ms after the nack, then 500 ms unacknowledged.
    assert.ok(third.receivedAt.getTime() >= nackedAt + 300 + 500, 'the ack timeout was kept');
    assert.equal(await third.ack(), true);
    await eventually(async () => !(await stored('acks', 'a-2')) && !(await stored('acks', 'a-1')), 'the acks took');
    await sub.close();
    assert.equal(sub.closed, true);
    assert.equal(sub.error, undefined);
  });

  test('for await over a subscription, ended by an AbortSignal', async () => {
    const controller = new AbortController();
    const sub = hg.subscribe('loop', 'g', { signal: controller.signal });
    await sub.ready;
    await hg.publishBatch(['l-0', 'l-1', 'l-2'].map((id) => ({ topic: 'loop', payload: id, id })));
    const seen = [];
    for await (const m of sub) {
      seen.push(`${m.id}@${m.attempt}`);
      await m.ack();
      if (seen.length === 3) controller.abort();
    }
    assert.deepEqual(seen, ['l-0@1', 'l-1@1', 'l-2@1']);
    assert.equal(sub.closed, true);
  });

  test('consume: acks what the handler resolves, nacks what it throws, up to its concurrency', async () => {
    let running = 0;
    let most = 0;
    const done = [];
    const errors = [];
    let release;
    const allIn = new Promise((r) => { release = r; });
    const consumer = hg.consume('work', 'workers', async (m) => {
      running++;
      most = Math.max(most, running);
      try {
        if (most === 4) release();
        await allIn; // Four handlers hold together before any finishes.
        if (m.payload.toString() === 'fail' && m.attempt === 1) throw new Error(`no ${m.id}`);
        done.push(`${m.id}@${m.attempt}`);
      } finally {
        running--;
      }
    }, { concurrency: 4, retryDelay: '50ms', onError: (e, m) => errors.push(`${m.id}: ${e.message}`) });
    await consumer.ready;
    await hg.publishBatch(Array.from({ length: 8 }, (_, i) => ({
      topic: 'work', payload: i % 3 === 0 ? 'fail' : 'ok', id: `w-${i}`,
    })));
    await eventually(() => done.length === 8, `8 done: ${done}`);
    assert.equal(most, 4);
    assert.deepEqual(done.slice().sort(),
      ['w-0@2', 'w-1@1', 'w-2@1', 'w-3@2', 'w-4@1', 'w-5@1', 'w-6@2', 'w-7@1']);
    assert.deepEqual(errors.sort(), ['w-0: no w-0', 'w-3: no w-3', 'w-6: no w-6']);
    assert.deepEqual([consumer.processed, consumer.failed], [8, 3]);
    await eventually(async () => {
      const s = await hg.stats('work');
      return s.topics[0].inFlight === 0 && s.topics[0].ready === 0;
    }, 'every message acknowledged');
    await consumer.close();
    await consumer.done;
  });

  test('a subscription to a bad group name fails with the broker\'s reason', async () => {
    const sub = hg.subscribe('loop', 'a b');
    await rejects(sub.ready, status.INVALID_ARGUMENT);
    await rejects(sub.next(), status.INVALID_ARGUMENT);
    assert.equal(sub.closed, true);
  });
});

describe('admin', () => {
  test('nextFireTimes: the fire times of a rule, as the broker computes them', async () => {
    // 02:30 does not exist in New York on 2027-03-14: it fires as the gap ends.
    const times = await hg.nextFireTimes({ cron: '30 2 * * *', timeZone: 'America/New_York' },
      { after: new Date('2027-03-13T00:00:00Z'), count: 3 });
    assert.deepEqual(times.map((t) => t.toISOString()),
      ['2027-03-13T07:30:00.000Z', '2027-03-14T07:00:00.000Z', '2027-03-15T06:30:00.000Z']);
    const every = await hg.nextFireTimes(
      { every: '15m', startAt: new Date('2027-01-01T00:05:00Z'), endAt: new Date('2027-01-01T00:50:00Z') },
      { after: new Date('2027-01-01T00:00:00Z'), count: 5 });
    assert.deepEqual(every.map((t) => t.toISOString()),
      ['2027-01-01T00:05:00.000Z', '2027-01-01T00:20:00.000Z', '2027-01-01T00:35:00.000Z']);
    await rejects(hg.nextFireTimes({ cron: '0 0 * * *', timeZone: 'Mars/Olympus' }), status.INVALID_ARGUMENT,
      'rule: unknown time zone "Mars/Olympus"');
    await assert.rejects(hg.nextFireTimes({ cron: '@daily', every: '1h' }), TypeError);
    await assert.rejects(hg.nextFireTimes({ cron: '@daily' }, { count: 0 }), TypeError);
  });

  test('stats, topics, groups, the schedule histogram, dead letters and redrive', async () => {
    const sub = hg.subscribe('admin', 'g1', { ackTimeout: '30s' });
    await sub.ready;
    const hour = 3_600_000;
    const base = Math.floor(Date.now() / hour) * hour + 2 * hour; // a whole hour, two to three hours ahead
    await hg.publishBatch([
      { topic: 'admin', payload: 's1', id: 's-1', deliverAt: new Date(base + 60_000) },
      { topic: 'admin', payload: 's2', id: 's-2', deliverAt: new Date(base + 120_000) },
      { topic: 'admin', payload: 's3', id: 's-3', deliverAt: new Date(base + hour + 60_000) },
      { topic: 'admin', payload: 'now', id: 'dead-1' },
    ]);
    const histogram = await hg.schedule('admin', new Date(base), new Date(base + 3 * hour), '1h');
    assert.deepEqual(histogram.buckets.map((b) => [b.start.getTime() - base, b.count]),
      [[0, 2], [hour, 1], [2 * hour, 0]]);
    assert.equal(histogram.total, 3);

    // g1 nacks it three times: --max_attempts=3 makes it a dead letter.
    for (const attempt of [1, 2, 3]) {
      const [m] = await take(sub, 1);
      assert.deepEqual(ids([m]), [`dead-1@${attempt}`]);
      assert.equal(await m.nack(), true);
    }
    await eventually(async () => (await hg.list('admin', 'dead')).messages.length === 1, 'a dead letter');
    // A group registered now gets what comes due from now on: not dead-1.
    const g0 = await hg.createGroup('admin', 'g0');
    assert.deepEqual([g0.topic, g0.name, g0.ready], ['admin', 'g0', 0]);
    await rejects(hg.createGroup('admin', 'g0'), status.ALREADY_EXISTS);
    const dead = await hg.list('admin', 'dead');
    assert.deepEqual(dead.messages.map((m) => [m.id, m.state, m.attempt]), [['dead-1', 'dead', 3]]);

    const groups = await hg.groups('admin');
    assert.deepEqual(groups.map((g) => [g.topic, g.name]), [['admin', 'g0'], ['admin', 'g1']]);
    assert.ok(groups[0].createdAt instanceof Date);
    assert.equal(groups[1].consumers, 1);
    const topics = await hg.topics();
    const t = topics.find((x) => x.name === 'admin');
    assert.deepEqual([t.scheduled, t.groups, t.deadLettered], [3, 2, 1]);
    const stats = await hg.stats('admin');
    assert.deepEqual(stats.topics.map((x) => [x.topic, x.scheduled, x.deadLettered]), [['admin', 3, 1]]);
    assert.equal(stats.serving, true);
    assert.match(stats.version, /^\d+\.\d+\.\d+/);
    assert.ok(stats.startedAt instanceof Date);
    await rejects(hg.stats('nothing-here'), status.NOT_FOUND);

    assert.equal(await hg.redrive('admin'), 1);
    const [back] = await take(sub, 1);
    assert.equal(back.id, 'dead-1');
    assert.equal(await back.ack(), true);
    assert.deepEqual((await hg.list('admin', 'dead')).messages, []);
    assert.equal(await hg.purge('admin', { scheduled: true }), 3);
    assert.equal(await hg.deleteGroup('admin', 'g0') >= 0, true);
    await sub.close();
  });
});
