'use strict';
// The topic-to-shard rule against the fixed vectors every client and node
// shares (the C++ shard hash tests, the Python client's), and durations.

const assert = require('node:assert/strict');
const { test } = require('node:test');
const { Hourglass, shardOf, toMillis, topicHash } = require('..');

test('the hash is FNV-1a 64 of the topic\'s bytes', () => {
  assert.equal(topicHash(''), 0xcbf29ce484222325n);
  assert.equal(topicHash('a'), 0xaf63dc4c8601ec8cn);
  assert.equal(topicHash('foobar'), 0x85944171f73967e8n);
  assert.equal(topicHash('orders'), 0x00125d9250be8b4cn);
  assert.equal(topicHash('payments'), 0xe17ac5686623db26n);
});

test('a topic and its dead-letter topic share a shard', () => {
  assert.equal(topicHash('orders.dlq'), topicHash('orders'));
  assert.equal(shardOf('orders.dlq', 16), 12);
  assert.equal(shardOf('orders', 16), 12);
  assert.equal(topicHash('a.dlq'), topicHash('a'));
  assert.equal(topicHash('a.dlq.dlq'), 0xf53ff7b50977075dn);
});

test('shards are the hash modulo the count', () => {
  assert.equal(shardOf('payments', 16), 6);
  assert.equal(shardOf('payments', 1), 0);
  assert.equal(shardOf('', 16), 5);
  assert.equal(shardOf('foobar', 16), 8);
  assert.throws(() => shardOf('orders', 0), { name: 'RangeError', message: 'shardCount must be at least 1, not 0' });
});

test('durations: milliseconds or strings with units', () => {
  assert.equal(toMillis(1500), 1500);
  assert.equal(toMillis('250ms'), 250);
  assert.equal(toMillis('10s'), 10_000);
  assert.equal(toMillis('1.5s'), 1500);
  assert.equal(toMillis('1h30m'), 5_400_000);
  assert.equal(toMillis('2d'), 172_800_000);
  assert.equal(toMillis('-1s'), -1000);
  for (const bad of ['', '10', '1x', 's', '1h 30m']) assert.throws(() => toMillis(bad), TypeError, bad);
});

test('the client checks its options before connecting', () => {
  assert.throws(() => new Hourglass({}), TypeError);
  assert.throws(() => new Hourglass({ addrs: [' ', ''] }), TypeError);
  assert.throws(() => new Hourglass({ addrs: ['127.0.0.1:1'], token: 'has space' }), TypeError);
  assert.throws(() => new Hourglass({ addrs: ['127.0.0.1:1'], maxPublishesInFlight: 0 }), RangeError);
});

test('a shard count from a trailer is taken up to 4,096', () => {
  const grpc = require('@grpc/grpc-js');
  const { HourglassError, status } = require('..');
  const { shardCountOf, redirectAddress } = require('../dist/cluster');
  const refusal = (code, trailers) => {
    const metadata = new grpc.Metadata();
    for (const [k, v] of Object.entries(trailers)) metadata.set(k, v);
    return new HourglassError(code, 'refused', metadata);
  };
  assert.equal(shardCountOf(refusal(status.UNAVAILABLE, { 'hourglass-shards': '16' })), 16);
  assert.equal(shardCountOf(refusal(status.FAILED_PRECONDITION, { 'hourglass-shards': '4096' })), 4096);
  for (const bad of ['4097', '0', '-3', '1e3', 'x', '']) {
    assert.equal(shardCountOf(refusal(status.UNAVAILABLE, { 'hourglass-shards': bad })), 0, bad);
  }
  assert.equal(redirectAddress(refusal(status.UNAVAILABLE, { 'hourglass-primary': '10.0.0.2:7070' })), '10.0.0.2:7070');
  assert.equal(redirectAddress(refusal(status.NOT_FOUND, { 'hourglass-primary': '10.0.0.2:7070' })), undefined);
});
