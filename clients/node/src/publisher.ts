import * as grpc from '@grpc/grpc-js';
import { HourglassError, fromGrpc } from './errors';
import { Endpoint, MAX_REDIRECTS, PRIMARY_TRAILER, SHARDS_TRAILER, log } from './cluster';
import { receipt } from './protocol';
import type { Receipt } from './types';
import type { ClientCore } from './core';

/**
 * Single messages on PublishStreams: one stream per node published to, many
 * requests in flight on each, their answers in request order.
 *
 * A message with an id is sent again (after a backoff, on a new stream, at
 * the primary in a cluster) after UNAVAILABLE or a broken stream, until its
 * deadline: the broker answers a pending id with its first receipt. A
 * message without an id is never sent again: it fails with the error.
 */

interface Pending {
  request: { messages: Record<string, unknown>[] };
  topic: string;
  repeatable: boolean;
  deadline: number; // Date.now() ms; Infinity for none
  failures: number;
  redirects: number;
  done: boolean;
  timer?: NodeJS.Timeout;
  resolve: (r: Receipt) => void;
  reject: (e: HourglassError) => void;
}

interface Stream {
  endpoint: Endpoint;
  call: grpc.ClientDuplexStream<any, any>;
  queue: Pending[]; // sent, not yet answered, in order
  ended: boolean;
}

export class Publisher {
  private readonly streams = new Map<string, Stream>();
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];
  private closing = false;
  /** Messages sent again after a failure (for tests and metrics). */
  retries = 0;

  constructor(private readonly core: ClientCore, private readonly maxInFlight: number) {}

  async publish(request: { messages: Record<string, unknown>[] }, repeatable: boolean): Promise<Receipt> {
    if (this.closing) throw new HourglassError(grpc.status.CANCELLED, 'the client is closed');
    while (this.inFlight >= this.maxInFlight) {
      await new Promise<void>((r) => this.waiting.push(r));
      if (this.closing) throw new HourglassError(grpc.status.CANCELLED, 'the client is closed');
    }
    this.inFlight++;
    return new Promise<Receipt>((resolve, reject) => {
      const timeout = this.core.timeoutMs;
      const p: Pending = {
        request, topic: request.messages[0].topic as string, repeatable,
        deadline: timeout === undefined ? Infinity : Date.now() + timeout,
        failures: 0, redirects: 0, done: false, resolve, reject,
      };
      if (timeout !== undefined) {
        p.timer = setTimeout(() => this.finish(p, new HourglassError(grpc.status.DEADLINE_EXCEEDED,
          `publish to topic "${p.topic}": no answer within ${timeout} ms`)), timeout);
      }
      this.send(p, false);
    });
  }

  /** Ends every stream once its answers are in (or `timeoutMs` passed); fails what is left. */
  async close(timeoutMs: number): Promise<void> {
    this.closing = true;
    for (const w of this.waiting.splice(0)) w();
    const streams = [...this.streams.values()];
    for (const s of streams) if (s.queue.every((p) => p.done)) s.call.end();
    const deadline = Date.now() + timeoutMs;
    while (this.inFlight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    for (const s of this.streams.values()) {
      for (const p of s.queue) this.finish(p, new HourglassError(grpc.status.CANCELLED, 'the client was closed'));
      s.call.end();
      s.call.cancel();
    }
    this.streams.clear();
  }

  private send(p: Pending, waitForReady: boolean): void {
    if (p.done) return;
    if (this.closing) {
      this.finish(p, new HourglassError(grpc.status.CANCELLED, 'the client was closed'));
      return;
    }
    const endpoint = this.core.router.route(p.topic);
    const stream = this.stream(endpoint, waitForReady);
    stream.queue.push(p);
    stream.call.write(p.request);
  }

  private stream(endpoint: Endpoint, waitForReady: boolean): Stream {
    const existing = this.streams.get(endpoint.address);
    if (existing && !existing.ended) return existing;
    const metadata = this.core.metadata(waitForReady);
    const call = endpoint.broker.PublishStream(metadata) as grpc.ClientDuplexStream<any, any>;
    const stream: Stream = { endpoint, call, queue: [], ended: false };
    this.streams.set(endpoint.address, stream);
    call.on('data', (response: any) => {
      for (const answer of response.answers ?? []) {
        const p = stream.queue.shift();
        if (!p) return; // The broker answered more than was asked: ignore.
        this.answer(stream, p, answer);
      }
      if (this.closing && stream.queue.every((q) => q.done)) call.end();
    });
    call.on('error', (err: unknown) => this.broken(stream, fromGrpc(err)));
    call.on('status', (s: grpc.StatusObject) => {
      if (s.code === grpc.status.OK) {
        this.broken(stream, new HourglassError(grpc.status.UNAVAILABLE, 'the publish stream ended'));
      }
    });
    return stream;
  }

  private answer(stream: Stream, p: Pending, answer: any): void {
    if (p.done) return;
    if (!answer.code) {
      if (!answer.receipts || answer.receipts.length !== 1) {
        this.finish(p, new HourglassError(grpc.status.INTERNAL,
          `the broker answered ${answer.receipts?.length ?? 0} receipts to a publish of 1 message`));
        return;
      }
      this.finish(p, receipt(answer.receipts[0]));
      return;
    }
    const metadata = new grpc.Metadata();
    if (answer.primary) metadata.set(PRIMARY_TRAILER, answer.primary);
    if (answer.shard_count) metadata.set(SHARDS_TRAILER, String(answer.shard_count));
    const error = new HourglassError(answer.code, answer.message ?? '', metadata);
    const primary = this.core.router.followNamed(stream.endpoint, answer.primary || undefined,
      Number(answer.shard_count) || 0, p.topic);
    if (answer.code === grpc.status.UNAVAILABLE && primary && p.redirects < MAX_REDIRECTS) {
      p.redirects++;
      this.send(p, false); // The node did nothing: at once, at the primary.
      return;
    }
    if (answer.code === grpc.status.UNAVAILABLE && p.repeatable) {
      this.retry(p, stream.endpoint, error);
      return;
    }
    this.finish(p, error);
  }

  private broken(stream: Stream, error: HourglassError): void {
    if (stream.ended) return;
    stream.ended = true;
    if (this.streams.get(stream.endpoint.address) === stream) this.streams.delete(stream.endpoint.address);
    const left = stream.queue.splice(0).filter((p) => !p.done);
    if (left.length > 0) log(`the publish stream to ${stream.endpoint.address} broke: ${error.message}`);
    // A redirect may come as the stream's status too.
    const primary = this.core.router.follow(stream.endpoint, error, left[0]?.topic ?? '');
    for (const p of left) {
      if (primary && p.redirects < MAX_REDIRECTS && error.code === grpc.status.UNAVAILABLE) {
        p.redirects++;
        this.send(p, false);
      } else if (p.repeatable && (error.code === grpc.status.UNAVAILABLE || error.code === grpc.status.CANCELLED
          || error.code === grpc.status.INTERNAL || error.code === grpc.status.UNKNOWN)) {
        this.retry(p, stream.endpoint, error);
      } else {
        this.finish(p, error);
      }
    }
  }

  private retry(p: Pending, failed: Endpoint, error: HourglassError): void {
    p.failures++;
    const wait = this.core.backoff.wait(p.failures);
    if (Date.now() + wait >= p.deadline || this.closing) {
      this.finish(p, error);
      return;
    }
    this.retries++;
    setTimeout(() => {
      if (p.done) return;
      const go = () => this.send(p, this.core.router.waitForReady());
      if (this.core.router.cluster && error.code === grpc.status.UNAVAILABLE) {
        this.core.rediscover(failed, p.deadline, p.topic).then(go, go);
      } else {
        go();
      }
    }, wait);
  }

  private finish(p: Pending, outcome: Receipt | HourglassError): void {
    if (p.done) return;
    p.done = true;
    if (p.timer) clearTimeout(p.timer);
    this.inFlight--;
    this.waiting.shift()?.();
    if (outcome instanceof HourglassError) p.reject(outcome);
    else p.resolve(outcome);
  }
}
