import * as grpc from '@grpc/grpc-js';
import { HourglassError, fromGrpc } from './errors';
import { Endpoint, MAX_REDIRECTS, log } from './cluster';
import type { ClientCore } from './core';
import { RECONNECT_CODES, SUBSCRIBED_METADATA } from './protocol';
import { dateOf, durationOf, toMillis, DurationInput } from './time';
import type { ConsumeOptions, SubscribeOptions } from './types';

/** One SubscribeBatches call, and the acks waiting to go out on it. */
interface Stream {
  endpoint: Endpoint;
  call: grpc.ClientDuplexStream<any, any>;
  open: boolean; // until it ended: acks and nacks go out only while open
  accepted: boolean;
  acks: string[];
  ackWaiters: ((sent: boolean) => void)[];
  flushing: boolean;
}

/** One delivery. Acknowledge it (`ack`) or reject it for redelivery (`nack`). */
export class Message {
  /** The message id, as in its receipt. */
  readonly id: string;
  readonly topic: string;
  readonly payload: Buffer;
  readonly headers: Record<string, string>;
  /** When it came due. */
  readonly deliverAt: Date;
  /** When the broker accepted it. */
  readonly publishedAt: Date;
  /** 1 on first delivery to the group; +1 for each redelivery. */
  readonly attempt: number;
  /** When this client read it. */
  readonly receivedAt: Date;
  private settled = false;

  /** @internal */
  constructor(d: any, private readonly stream: Stream, private readonly subscription: Subscription) {
    this.id = d.id;
    this.topic = d.topic;
    this.payload = Buffer.isBuffer(d.payload) ? d.payload : Buffer.from(d.payload ?? []);
    this.headers = { ...(d.headers ?? {}) };
    this.deliverAt = dateOf(d.deliver_at) ?? new Date(0);
    this.publishedAt = dateOf(d.published_at) ?? new Date(0);
    this.attempt = d.attempt;
    this.receivedAt = new Date();
  }

  /** @internal */
  get live(): boolean { return this.stream.open; }

  /**
   * Acknowledges the message: the group is done with it. Acks are batched (all
   * those of one turn of the event loop go in one request). Resolves true once
   * the ack is written to the stream; false if it cannot be (already settled,
   * or its stream broke: the message then comes again).
   */
  ack(): Promise<boolean> {
    if (this.settled || !this.stream.open) return Promise.resolve(false);
    this.settled = true;
    return this.subscription.queueAck(this.stream, this.id);
  }

  /**
   * Rejects the message: it is delivered again (attempt + 1) after `delay`
   * (default: at once). After the broker's --max_attempts it goes to the
   * dead-letter topic `<topic>.dlq`. Resolves as `ack` does.
   */
  nack(options: { delay?: DurationInput } = {}): Promise<boolean> {
    if (this.settled || !this.stream.open) return Promise.resolve(false);
    this.settled = true;
    const nack: Record<string, unknown> = { id: this.id };
    if (options.delay !== undefined) nack.delay = durationOf(toMillis(options.delay, 'nack: delay'));
    return this.subscription.write(this.stream, { nack });
  }
}

/**
 * A consumer of one topic in one group, over SubscribeBatches streams that it
 * reopens (with backoff, at the primary in a cluster) when they break: what
 * was not acknowledged comes again. Iterate with `for await`; `break` closes it.
 */
export class Subscription implements AsyncIterable<Message> {
  /** Resolves once the broker accepted the first stream (the group then exists); rejects if it refused it. */
  readonly ready: Promise<void>;
  /** How many times a stream was opened again after one broke. */
  reconnects = 0;
  private readonly openRequest: { open: Record<string, unknown> };
  private readonly items: Message[] = [];
  private readonly takers: (() => void)[] = [];
  private stream: Stream | undefined;
  private everAccepted = false;
  private closing = false;
  private finished = false;
  private endError: HourglassError | undefined;
  private failures = 0;
  private redirects = 0;
  private readonly openDeadline: number;
  private openTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly finishWaiters: (() => void)[] = [];
  private resolveReady!: () => void;
  private rejectReady!: (e: HourglassError) => void;
  private readonly reconnect: boolean;
  private readonly name: string;

  /** @internal */
  constructor(private readonly core: ClientCore, readonly topic: string, readonly group: string,
    options: SubscribeOptions = {}) {
    const open: Record<string, unknown> = { topic, group, max_in_flight: options.maxInFlight ?? 0 };
    if (options.ackTimeout !== undefined) open.ack_timeout = durationOf(toMillis(options.ackTimeout, 'ackTimeout'));
    if (!Number.isInteger(open.max_in_flight) || (open.max_in_flight as number) < 0) {
      throw new RangeError('maxInFlight: a whole number, 0 for the broker\'s default');
    }
    this.openRequest = { open };
    this.reconnect = options.reconnect ?? true;
    this.name = `topic "${topic}", group "${group}"`;
    this.ready = new Promise<void>((resolve, reject) => { this.resolveReady = resolve; this.rejectReady = reject; });
    this.ready.catch(() => undefined); // Also surfaced by iteration.
    this.openDeadline = core.deadline();
    if (core.timeoutMs !== undefined) {
      this.openTimer = setTimeout(() => {
        if (!this.everAccepted && !this.finished) {
          const error = new HourglassError(grpc.status.DEADLINE_EXCEEDED,
            `${this.name}: not subscribed within ${core.timeoutMs} ms`);
          this.stream?.call.cancel();
          this.finish(error);
        }
      }, core.timeoutMs);
    }
    const signal = options.signal;
    if (signal) {
      if (signal.aborted) queueMicrotask(() => void this.close());
      else signal.addEventListener('abort', () => void this.close(), { once: true });
    }
    this.start(false);
  }

  /** The error the subscription ended with; undefined while it runs or after a clean end. */
  get error(): HourglassError | undefined { return this.endError; }
  get closed(): boolean { return this.finished; }

  /**
   * The next delivery; undefined once the subscription is closed. Rejects with
   * the error it ended with. Deliveries of a stream that broke are skipped
   * (they come again).
   */
  next(): Promise<Message | undefined> {
    return this.receive(Infinity);
  }

  /**
   * As `next`, but resolves undefined also when nothing came within
   * `timeoutMs` (`closed` tells the two apart); nothing is taken then.
   */
  async receive(timeoutMs: number): Promise<Message | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      while (this.items.length > 0) {
        const m = this.items.shift()!;
        if (m.live) return m;
      }
      if (this.finished) {
        if (this.endError) throw this.endError;
        return undefined;
      }
      const left = deadline - Date.now();
      if (left <= 0) return undefined;
      await new Promise<void>((resolve) => {
        let timer: NodeJS.Timeout | undefined;
        const wake = () => { if (timer) clearTimeout(timer); resolve(); };
        this.takers.push(wake);
        if (left !== Infinity) {
          timer = setTimeout(() => {
            const i = this.takers.indexOf(wake);
            if (i >= 0) this.takers.splice(i, 1);
            resolve();
          }, left);
        }
      });
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<Message> {
    return {
      next: async () => {
        const m = await this.next();
        return m === undefined ? { done: true, value: undefined } : { done: false, value: m };
      },
      return: async () => {
        await this.close();
        return { done: true, value: undefined };
      },
    };
  }

  /**
   * Ends the subscription: sends the acks queued, ends the stream and waits up
   * to `timeoutMs` for the broker to end it (then cancels it). The broker hands
   * what was not acknowledged back to the group at once. Idempotent.
   */
  async close(timeoutMs = 5000): Promise<void> {
    if (this.finished) return;
    this.closing = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const stream = this.stream;
    if (!stream || !stream.open) {
      this.finish(undefined);
      return;
    }
    if (stream.accepted) {
      await this.flush(stream);
      if (stream.open) stream.call.end();
    } else {
      stream.call.cancel();
    }
    if (!this.finished) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(() => { stream.call.cancel(); this.finish(undefined); resolve(); }, timeoutMs);
        this.finishWaiters.push(() => { clearTimeout(t); resolve(); });
      });
    }
  }

  /** @internal */
  queueAck(stream: Stream, id: string): Promise<boolean> {
    stream.acks.push(id);
    const sent = new Promise<boolean>((r) => stream.ackWaiters.push(r));
    if (stream.acks.length === 1) setImmediate(() => void this.flush(stream));
    return sent;
  }

  /** @internal Writes a request on `stream`; resolves whether it went out. */
  write(stream: Stream, request: unknown): Promise<boolean> {
    if (!stream.open) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      try {
        stream.call.write(request, () => resolve(stream.open));
      } catch {
        resolve(false);
      }
    });
  }

  private async flush(stream: Stream): Promise<void> {
    if (stream.acks.length === 0) return;
    const ids = stream.acks.splice(0);
    const waiters = stream.ackWaiters.splice(0);
    const sent = await this.write(stream, { ack: { ids } });
    for (const w of waiters) w(sent);
  }

  private start(waitForReady: boolean): void {
    if (this.closing || this.finished) return;
    const endpoint = this.core.router.route(this.topic);
    const call = endpoint.broker.SubscribeBatches(this.core.metadata(waitForReady)) as grpc.ClientDuplexStream<any, any>;
    const stream: Stream = { endpoint, call, open: true, accepted: false, acks: [], ackWaiters: [], flushing: false };
    this.stream = stream;
    call.on('metadata', (md: grpc.Metadata) => {
      if (String(md.get(SUBSCRIBED_METADATA)[0] ?? '') !== '1') return;
      stream.accepted = true;
      this.failures = 0;
      if (this.everAccepted) log(`${this.name}: subscribed again`);
      this.everAccepted = true;
      if (this.openTimer) clearTimeout(this.openTimer);
      this.resolveReady();
    });
    call.on('data', (batch: any) => {
      for (const d of batch.deliveries ?? []) this.items.push(new Message(d, stream, this));
      this.wake();
    });
    call.on('error', (err: unknown) => this.ended(stream, fromGrpc(err)));
    call.on('status', (s: grpc.StatusObject) => { if (s.code === grpc.status.OK) this.ended(stream, undefined); });
    call.write(this.openRequest);
  }

  private ended(stream: Stream, error: HourglassError | undefined): void {
    if (!stream.open) return;
    stream.open = false;
    for (const w of stream.ackWaiters.splice(0)) w(false);
    stream.acks.length = 0;
    this.wake(); // Buffered deliveries of this stream are now skipped.
    if (this.closing || this.finished) {
      this.finish(undefined);
      return;
    }
    const unavailable = error?.code === grpc.status.UNAVAILABLE;
    if (!this.everAccepted && unavailable && this.redirects < MAX_REDIRECTS) {
      // Cluster mode: refused by a node that is not the primary, or its node
      // did not answer: open it where the primary is.
      const named = this.core.router.follow(stream.endpoint, error!, this.topic);
      const found = named ? Promise.resolve(named)
        : this.core.rediscover(stream.endpoint, this.openDeadline, this.topic, () => this.closing);
      found.then((primary) => {
        if (primary) {
          this.redirects++;
          this.start(false);
        } else {
          this.finish(error);
        }
      }, () => this.finish(error));
      return;
    }
    const again = this.everAccepted && this.reconnect && error !== undefined && RECONNECT_CODES.has(error.code);
    if (!again) {
      this.finish(error);
      return;
    }
    this.failures++;
    const wait = this.core.backoff.wait(this.failures);
    log(`${this.name}: stream ended (${error!.message}); subscribing again in ${Math.round(wait)} ms`);
    this.retryTimer = setTimeout(() => {
      const go = () => {
        if (this.closing || this.finished) return;
        this.reconnects++;
        this.start(this.core.router.waitForReady());
      };
      if (unavailable && this.core.router.cluster) {
        const named = this.core.router.follow(stream.endpoint, error!, this.topic);
        if (named) go();
        else this.core.rediscover(stream.endpoint, Infinity, this.topic, () => this.closing).then(go, go);
      } else {
        go();
      }
    }, wait);
  }

  private finish(error: HourglassError | undefined): void {
    if (this.finished) return;
    this.finished = true;
    this.endError = error;
    if (this.openTimer) clearTimeout(this.openTimer);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (error && !this.everAccepted) this.rejectReady(error);
    else this.resolveReady();
    this.wake();
    for (const w of this.finishWaiters.splice(0)) w();
  }

  private wake(): void {
    for (const t of this.takers.splice(0)) t();
  }
}

/** A handler of `consume`: resolves to ack, throws to nack. */
export type Handler = (message: Message) => unknown | Promise<unknown>;

/**
 * Runs a handler for each delivery of a subscription, at most `concurrency`
 * at once: acks when it resolves, nacks (after `retryDelay`) when it throws.
 */
export class Consumer {
  readonly subscription: Subscription;
  /** Resolves when the consumer has stopped; rejects with the error its subscription ended with. */
  readonly done: Promise<void>;
  /** Handlers that resolved and threw so far. */
  processed = 0;
  failed = 0;
  private stopping = false;
  private readonly running = new Set<Promise<void>>();
  private readonly concurrency: number;

  /** @internal */
  constructor(core: ClientCore, topic: string, group: string, private readonly handler: Handler,
    private readonly options: ConsumeOptions = {}) {
    this.concurrency = options.concurrency ?? 1;
    if (!Number.isInteger(this.concurrency) || this.concurrency < 1) throw new RangeError('concurrency: at least 1');
    const maxInFlight = options.maxInFlight ?? Math.max(100, this.concurrency);
    const { signal, ...rest } = options;
    this.subscription = new Subscription(core, topic, group, { ...rest, maxInFlight });
    if (signal) {
      if (signal.aborted) queueMicrotask(() => void this.close());
      else signal.addEventListener('abort', () => void this.close(), { once: true });
    }
    this.done = this.loop();
    this.done.catch((e) => this.options.onError?.(e));
  }

  /** Resolves once the broker accepted the subscription. */
  get ready(): Promise<void> { return this.subscription.ready; }

  /** Stops taking deliveries, waits for the running handlers (their acks and nacks go out), then closes the subscription. */
  async close(): Promise<void> {
    this.stopping = true;
    await Promise.allSettled([...this.running]);
    await this.subscription.close();
    await this.done.catch(() => undefined);
  }

  private async loop(): Promise<void> {
    for (;;) {
      while (this.running.size >= this.concurrency) await Promise.race(this.running);
      if (this.stopping) break;
      const m = await this.subscription.next();
      if (m === undefined || this.stopping) break; // One taken while stopping comes again.
      const task = this.handle(m).finally(() => this.running.delete(task));
      this.running.add(task);
    }
    await Promise.allSettled([...this.running]);
  }

  private async handle(m: Message): Promise<void> {
    try {
      await this.handler(m);
    } catch (error) {
      this.failed++;
      let delay: DurationInput | undefined;
      try {
        const r = this.options.retryDelay;
        delay = typeof r === 'function' ? r(m, error) : r;
      } catch { delay = undefined; }
      await m.nack(delay === undefined ? {} : { delay });
      try { this.options.onError?.(error, m); } catch { /* the caller's */ }
      return;
    }
    this.processed++;
    await m.ack();
  }
}
