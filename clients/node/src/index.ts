/**
 * The Node.js client of Hourglass, a persistent delayed-message broker.
 *
 *   const hg = new Hourglass({ addrs: ['127.0.0.1:7070'] });
 *   await hg.publish('orders', Buffer.from('...'), { delay: '10s', id: 'order-1' });
 */
export { Hourglass } from './client';
export { HourglassError, codeName } from './errors';
export { Subscription, Consumer, Message } from './subscription';
export type { Handler } from './subscription';
export { topicHash, shardOf } from './shards';
export { toMillis } from './time';
export type { DurationInput } from './time';
export { status } from '@grpc/grpc-js';
export * from './types';
