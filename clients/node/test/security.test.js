'use strict';
// Bearer tokens and TLS: the client against hourglassd with --auth_tokens,
// and with --tls_cert/--tls_key (and --tls_client_ca).

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { after, before, describe, test } = require('node:test');
const { Hourglass, HourglassError, status } = require('..');
const { Certificates, WAIT, ids, startDaemon, take, tempDir, writePrivate } = require('./helpers');

const PRODUCER = 'producer-0123456789abcdef';
const CONSUMER = 'consumer-0123456789abcdef';
const ADMIN = 'admin-0123456789abcdef012';

function isError(code, details) {
  return (e) => {
    assert.ok(e instanceof HourglassError, `not an HourglassError: ${e}`);
    assert.equal(e.code, code, e.message);
    if (details !== undefined) assert.equal(e.details, details);
    return true;
  };
}

const daemons = [];
after(async () => {
  for (const d of daemons) assert.equal(await d.stop(), 0, d.output());
});

describe('tokens', () => {
  let daemon;
  before(async () => {
    const dir = tempDir('tokens');
    const tokens = writePrivate(path.join(dir, 'tokens.txt'),
      `# The tokens of the Node client's tests.\n${PRODUCER} produce\n${CONSUMER} consume\n${ADMIN} admin,produce,consume\n`);
    daemon = await startDaemon([`--auth_tokens=${tokens}`], 'tokens');
    daemons.push(daemon);
  });

  test('tokens grant roles; a missing, unknown or weaker token gets the broker\'s refusal', async () => {
    const addrs = [daemon.address];
    const operator = new Hourglass({ addrs, token: ADMIN, timeout: WAIT });
    const producer = new Hourglass({ addrs, token: PRODUCER, timeout: WAIT });
    const consumer = new Hourglass({ addrs, token: CONSUMER, timeout: WAIT });
    try {
      // Only an admin creates a group; then a consumer may join it.
      const created = operator.subscribe('orders', 'billing');
      await created.ready;
      await created.close();
      const sub = consumer.subscribe('orders', 'billing');
      await sub.ready;
      const receipt = await producer.publish('orders', 'x', { delay: 100, id: 'order-1' });
      const [m] = await take(sub, 1);
      assert.deepEqual(ids([m]), ['order-1@1']);
      assert.equal(m.deliverAt.getTime(), receipt.deliverAt.getTime());
      assert.equal(await m.ack(), true);
      await sub.close();

      await assert.rejects(consumer.publish('orders', 'x'),
        isError(status.PERMISSION_DENIED, 'message 0: token lacks role produce for topic "orders"'));
      await assert.rejects(consumer.publishBatch([{ topic: 'orders', payload: 'x' }]),
        isError(status.PERMISSION_DENIED, 'message 0: token lacks role produce for topic "orders"'));
      const refused = consumer.subscribe('orders', 'new-group');
      await assert.rejects(refused.ready, (e) => isError(status.NOT_FOUND)(e)
        && e.details.startsWith('group "new-group" of topic "orders" does not exist'));

      await producer.publish('orders', 'x', { delay: '1h', id: 'o-2' });
      await assert.rejects(producer.reschedule('orders', 'o-2', { delay: 1 }),
        isError(status.PERMISSION_DENIED, 'token lacks role admin for topic "orders"'));
      const moved = await operator.reschedule('orders', 'o-2', { delay: '2h' });
      assert.equal(moved.id, 'o-2');
      assert.deepEqual(await producer.cancel('orders', 'o-2'), { cancelled: true });
    } finally {
      await Promise.all([operator.close(), producer.close(), consumer.close()]);
    }

    const missing = 'missing "authorization: Bearer <token>" metadata';
    const anonymous = new Hourglass({ addrs, timeout: WAIT });
    try {
      await assert.rejects(anonymous.publish('orders', 'x'), isError(status.UNAUTHENTICATED, missing));
      await assert.rejects(anonymous.subscribe('orders', 'billing').ready, isError(status.UNAUTHENTICATED, missing));
      await assert.rejects(anonymous.stats(), isError(status.UNAUTHENTICATED, missing));
    } finally {
      await anonymous.close();
    }
    const stranger = new Hourglass({ addrs, token: 'unknown-0123456789abcdef', timeout: WAIT });
    try {
      await assert.rejects(stranger.cancel('orders', 'x'), isError(status.UNAUTHENTICATED, 'unknown token'));
      await assert.rejects(stranger.publish('orders', 'x', { id: 'with-id' }), isError(status.UNAUTHENTICATED, 'unknown token'));
    } finally {
      await stranger.close();
    }
  });
});

describe('TLS', () => {
  let certs;
  let daemon;
  before(async () => {
    certs = new Certificates(tempDir('certs'));
    daemon = await startDaemon([`--tls_cert=${certs.pem('server')}`, `--tls_key=${certs.key('server')}`], 'tls');
    daemons.push(daemon);
  });

  test('TLS with the broker\'s CA, as a path, PEM bytes or PEM text with a server name', async () => {
    const ca = certs.pem('ca');
    const variants = [
      { ca },
      { ca: fs.readFileSync(ca) },
      { ca: fs.readFileSync(ca, 'utf8'), serverName: 'localhost' },
    ];
    for (const [i, tls] of variants.entries()) {
      const hg = new Hourglass({ addrs: [daemon.address], tls, timeout: WAIT });
      try {
        const sub = hg.subscribe('tls', 'g');
        await sub.ready;
        const receipt = await hg.publish('tls', 'over tls', { id: `m-${i}` });
        const [m] = await take(sub, 1);
        assert.deepEqual([m.id, m.payload.toString(), m.deliverAt.getTime()],
          [`m-${i}`, 'over tls', receipt.deliverAt.getTime()]);
        assert.equal(await m.ack(), true);
      } finally {
        await hg.close();
      }
    }
  });

  test('plaintext, the system\'s CAs, another CA and a wrong server name are refused', async () => {
    const refused = [undefined, true, { ca: certs.pem('other-ca') }, { ca: certs.pem('ca'), serverName: 'other.test' }];
    for (const tls of refused) {
      const hg = new Hourglass({ addrs: [daemon.address], tls, timeout: 5000 });
      try {
        await assert.rejects(hg.stats(), isError(status.UNAVAILABLE), JSON.stringify(tls));
      } finally {
        await hg.close();
      }
    }
  });

  test('mutual TLS needs a client certificate', async () => {
    const mtls = await startDaemon([`--tls_cert=${certs.pem('server')}`, `--tls_key=${certs.key('server')}`,
      `--tls_client_ca=${certs.pem('ca')}`], 'mtls');
    daemons.push(mtls);
    const mine = new Hourglass({ addrs: [mtls.address], timeout: WAIT,
      tls: { ca: certs.pem('ca'), cert: certs.pem('client'), key: certs.key('client') } });
    try {
      const r = await mine.publish('mtls', 'x', { delay: '1h', id: 'm-1' });
      assert.equal(r.id, 'm-1');
    } finally {
      await mine.close();
    }
    const without = new Hourglass({ addrs: [mtls.address], tls: { ca: certs.pem('ca') }, timeout: 5000 });
    try {
      await assert.rejects(without.publishBatch([{ topic: 'mtls', payload: 'x' }]), isError(status.UNAVAILABLE));
    } finally {
      await without.close();
    }
  });
});
