import * as grpc from '@grpc/grpc-js';
import { HourglassError, fromGrpc } from './errors';
import { ClientCore } from './core';
import { shardCountOf } from './cluster';
import { shardOf } from './shards';
import { Publisher } from './publisher';
import { message, receipt, repeatable, whenFields } from './protocol';
import { Consumer, Handler, Subscription } from './subscription';
import { dateOf, durationOf, millisOf, timestampOf, toMillis, DurationInput } from './time';
import type {
  ConsumeOptions, GroupInfo, HourglassOptions, ListOptions, MessageInfo, MessageInput, MessagePage, MessageState, Payload,
  NextFireTimesOptions, PublishOptions, Receipt, RecurrenceRule, Schedule, Snapshot, Stats, SubscribeOptions,
  TopicInfo, When,
} from './types';

const STATES: Record<MessageState, string> = {
  scheduled: 'MESSAGE_STATE_SCHEDULED',
  ready: 'MESSAGE_STATE_READY',
  in_flight: 'MESSAGE_STATE_IN_FLIGHT',
  dead: 'MESSAGE_STATE_DEAD',
};

function stateOf(s: string): MessageState | 'unspecified' {
  const found = (Object.keys(STATES) as MessageState[]).find((k) => STATES[k] === s);
  return found ?? 'unspecified';
}

function messageInfo(m: any): MessageInfo {
  return {
    id: m.id, topic: m.topic, state: stateOf(m.state), deliverAt: dateOf(m.deliver_at), publishedAt: dateOf(m.published_at),
    payloadSize: m.payload_size, headers: { ...(m.headers ?? {}) }, payloadPreview: Buffer.from(m.payload_preview ?? []),
    groups: (m.groups ?? []).map((g: any) => ({ group: g.group, state: stateOf(g.state), attempt: g.attempt,
      redeliverAt: dateOf(g.redeliver_at) })),
    attempt: m.attempt,
  };
}

function group(g: any): GroupInfo {
  return { topic: g.topic, name: g.name, createdAt: dateOf(g.created_at), ready: g.ready, inFlight: g.in_flight,
    consumers: g.consumers };
}

/**
 * A client of one hourglassd, or of a cluster of them. Connects on first use;
 * `close()` when done.
 */
export class Hourglass {
  private readonly core: ClientCore;
  private readonly publisher: Publisher;
  private readonly subscriptions = new Set<Subscription>();
  private readonly consumers = new Set<Consumer>();
  private closed = false;

  constructor(options: HourglassOptions) {
    this.core = new ClientCore(options);
    const maxInFlight = options.maxPublishesInFlight ?? 1000;
    if (!Number.isInteger(maxInFlight) || maxInFlight < 1) throw new RangeError('maxPublishesInFlight: at least 1');
    this.publisher = new Publisher(this.core, maxInFlight);
  }

  /** Messages of `publish` sent again after a failure (a broken stream, a failover). */
  get publishRetries(): number { return this.publisher.retries; }

  /** Where calls about no topic go now (in a cluster, the primary it follows). */
  get currentAddress(): string { return this.core.router.currentEndpoint().address; }

  /**
   * Stores one message durably, due after `delay` or at `deliverAt` (default
   * now), with an optional deadline (`ttl` or `expireAt`, and `onExpire`).
   * Rides a PublishStream shared by every `publish` of the client: many
   * can be in flight at once. With an `id`, it is retried after UNAVAILABLE
   * (the broker restarting, a failover) until the client's timeout.
   */
  publish(topic: string, payload?: Payload, options: PublishOptions = {}): Promise<Receipt> {
    let request;
    try {
      request = { messages: [message({ ...options, topic, payload }, 'publish')] };
    } catch (e) {
      return Promise.reject(e);
    }
    return this.publisher.publish(request, !!options.id);
  }

  /**
   * Stores every message durably, or none (one Publish call). In a cluster of
   * several shards, all-or-nothing holds within each shard: a batch spanning
   * shards is sent as one call per shard.
   */
  async publishBatch(messages: MessageInput[]): Promise<Receipt[]> {
    if (!Array.isArray(messages)) throw new TypeError('publishBatch: an array of messages');
    const built = messages.map((m, i) => message(m, `publishBatch: message ${i}`));
    const ids = repeatable(messages);
    const send = async (indices: number[]) => {
      const response = await this.core.unary('broker', 'Publish', { messages: indices.map((i) => built[i]) },
        (built[indices[0]]?.topic as string) ?? '', ids);
      const receipts = (response.receipts ?? []).map(receipt);
      if (receipts.length !== indices.length) {
        throw new HourglassError(grpc.status.INTERNAL,
          `the broker answered ${receipts.length} receipts to a publish of ${indices.length} messages`);
      }
      return receipts;
    };
    const all = built.map((_, i) => i);
    let byShard = this.split(built, this.core.router.knownShardCount());
    if (byShard.size === 0) {
      try {
        return await send(all);
      } catch (e) {
        const error = fromGrpc(e);
        const count = error.code === grpc.status.FAILED_PRECONDITION ? shardCountOf(error) : 0;
        byShard = this.split(built, count);
        if (byShard.size === 0) throw error;
      }
    }
    const parts = [...byShard.entries()];
    const outcomes = await Promise.allSettled(parts.map(([, indices]) => send(indices)));
    const result: Receipt[] = new Array(built.length);
    const failed: string[] = [];
    const stored: number[] = [];
    let first: HourglassError | undefined;
    outcomes.forEach((o, k) => {
      const [shard, indices] = parts[k];
      if (o.status === 'fulfilled') {
        indices.forEach((i, j) => { result[i] = o.value[j]; });
        stored.push(...indices);
      } else {
        const error = fromGrpc(o.reason);
        first ??= error;
        failed.push(`shard ${shard} (messages ${indices.join(', ')}) failed: ${error.details}`);
      }
    });
    if (first) {
      stored.sort((a, b) => a - b);
      throw new HourglassError(first.code, `${failed.join('; ')}; the batch spans shards ${parts.map(([s]) => s).join(', ')}`
        + ` and is all-or-nothing within each shard only: ${stored.length ? `messages ${stored.join(', ')} were stored`
          : 'none of its messages were stored'}`, first.metadata, { cause: first });
    }
    return result;
  }

  /**
   * Cancels a message that is scheduled and not yet due. Resolves
   * `{ cancelled: false }` when there is none (never published, already due,
   * cancelled or acknowledged): the broker's NOT_FOUND.
   */
  async cancel(topic: string, id: string): Promise<{ cancelled: boolean }> {
    try {
      await this.core.unary('broker', 'Cancel', { topic, id }, topic);
      return { cancelled: true };
    } catch (e) {
      const error = fromGrpc(e);
      if (error.code === grpc.status.NOT_FOUND) return { cancelled: false };
      throw error;
    }
  }

  /**
   * Moves a scheduled, not-yet-due message to a new due time (the Admin
   * service's Reschedule: with tokens, the admin role). Rejects NOT_FOUND as
   * `cancel` would resolve `{ cancelled: false }`.
   */
  async reschedule(topic: string, id: string, when: When): Promise<Receipt> {
    const request = { topic, id, ...whenFields(when, 'reschedule', true) };
    return receipt(await this.core.unary('admin', 'Reschedule', request, topic));
  }

  /** Consumes `topic` as a member of `group`: iterate with `for await`. */
  subscribe(topic: string, group: string, options: SubscribeOptions = {}): Subscription {
    this.checkOpen();
    const sub = new Subscription(this.core, topic, group, options);
    this.subscriptions.add(sub);
    return sub;
  }

  /**
   * Runs `handler` for each delivery of `topic` in `group`, up to
   * `concurrency` at once: acks when it resolves, nacks when it throws.
   */
  consume(topic: string, group: string, handler: Handler, options: ConsumeOptions = {}): Consumer {
    this.checkOpen();
    const consumer = new Consumer(this.core, topic, group, handler, options);
    this.consumers.add(consumer);
    return consumer;
  }

  // --- The Admin service ------------------------------------------------------

  /** Counts, rates and lateness of every topic or of one, and the broker's version and health. */
  async stats(topic?: string): Promise<Stats> {
    const r = await this.core.unary('admin', 'GetStats', { topic: topic ?? '' }, topic ?? '');
    const p = (x: any) => ({ p50: millisOf(x?.p50) ?? 0, p90: millisOf(x?.p90) ?? 0, p99: millisOf(x?.p99) ?? 0,
      max: millisOf(x?.max) ?? 0 });
    return {
      topics: (r.topics ?? []).map((t: any) => ({
        topic: t.topic, scheduled: t.scheduled, ready: t.ready, inFlight: t.in_flight, deadLettered: t.dead_lettered,
        publishRate: t.publish_rate, deliveryRate: t.delivery_rate, lateness: p(t.lateness),
        groups: (t.groups ?? []).map((g: any) => ({ group: g.group, ready: g.ready, inFlight: g.in_flight,
          consumers: g.consumers, ackRate: g.ack_rate })),
      })),
      startedAt: dateOf(r.started_at), version: r.version, formatVersion: r.format_version, storeId: r.store_id,
      serving: r.serving, notServingReason: r.not_serving_reason,
    };
  }

  /** Every topic that has messages or groups, in name order. */
  async topics(): Promise<TopicInfo[]> {
    const r = await this.core.unary('admin', 'ListTopics', {}, '');
    return (r.topics ?? []).map((t: any) => ({ name: t.name, scheduled: t.scheduled, groups: t.groups, ready: t.ready,
      inFlight: t.in_flight, deadLettered: t.dead_lettered }));
  }

  /** The groups of `topic`, in name order. */
  async groups(topic: string): Promise<GroupInfo[]> {
    const r = await this.core.unary('admin', 'ListGroups', { topic }, topic);
    return (r.groups ?? []).map(group);
  }

  /** Registers a group before any consumer subscribes. */
  async createGroup(topic: string, name: string): Promise<GroupInfo> {
    return group(await this.core.unary('admin', 'CreateGroup', { topic, group: name }, topic));
  }

  /** Deletes a group; how many ready and in-flight entries went with it. */
  async deleteGroup(topic: string, name: string): Promise<number> {
    return (await this.core.unary('admin', 'DeleteGroup', { topic, group: name }, topic)).removed;
  }

  /** One page of the messages of `topic` in `state`, in due-time order. */
  async list(topic: string, state: MessageState, options: ListOptions = {}): Promise<MessagePage> {
    if (!(state in STATES)) throw new TypeError(`list: state is one of ${Object.keys(STATES).join(', ')}`);
    const request: Record<string, unknown> = {
      topic, state: STATES[state], group: options.group ?? '', page_size: options.pageSize ?? 0,
      page_token: options.pageToken ?? '',
    };
    if (options.dueFrom) request.due_from = timestampOf(options.dueFrom);
    if (options.dueTo) request.due_to = timestampOf(options.dueTo);
    const r = await this.core.unary('admin', 'ListMessages', request, topic);
    return { messages: (r.messages ?? []).map(messageInfo), nextPageToken: r.next_page_token || undefined };
  }

  /** One message, with its state in every group. */
  async show(topic: string, id: string, options: { previewBytes?: number } = {}): Promise<MessageInfo> {
    return messageInfo(await this.core.unary('admin', 'GetMessage',
      { topic, id, preview_bytes: options.previewBytes ?? 0 }, topic));
  }

  /** Publishes dead letters of `topic` (all, or those of `ids`) back to it, due now; how many moved. */
  async redrive(topic: string, ids?: string[]): Promise<number> {
    return (await this.core.unary('admin', 'RedriveDeadLetters', { topic, ids: ids ?? [] }, topic)).redriven;
  }

  /** How many scheduled messages of `topic` come due in each `bucket` of [from, to). */
  async schedule(topic: string, from: Date, to: Date, bucket: DurationInput): Promise<Schedule> {
    const r = await this.core.unary('admin', 'GetSchedule', {
      topic, from: timestampOf(from), to: timestampOf(to), bucket: durationOf(toMillis(bucket, 'bucket')),
    }, topic);
    return { buckets: (r.buckets ?? []).map((b: any) => ({ start: dateOf(b.start)!, count: b.count })), total: r.total };
  }

  /** Deletes the scheduled and/or ready messages of `topic`; how many. */
  async purge(topic: string, what: { scheduled?: boolean; ready?: boolean }): Promise<number> {
    return (await this.core.unary('admin', 'PurgeTopic',
      { topic, scheduled: !!what.scheduled, ready: !!what.ready }, topic)).purged;
  }

  /**
   * The next fire times of a recurring rule, computed by the broker, storing
   * nothing (Recurrences.PreviewRecurrence; any valid token). Rejects
   * INVALID_ARGUMENT naming the rule's bad field, e.g. `rule: unknown time
   * zone "Mars/Olympus"`; throws a TypeError, before any call, for both or
   * neither of `cron` and `every`, or a count outside 1 to 1000.
   */
  async nextFireTimes(rule: RecurrenceRule, options: NextFireTimesOptions = {}): Promise<Date[]> {
    if ((rule.cron === undefined) === (rule.every === undefined)) {
      throw new TypeError('nextFireTimes: give exactly one of cron and every');
    }
    const count = options.count ?? 10;
    if (!Number.isInteger(count) || count < 1 || count > 1000) {
      throw new TypeError(`nextFireTimes: count ${count} is not an integer from 1 to 1000`);
    }
    const request: Record<string, unknown> = {
      rule: {
        ...(rule.cron !== undefined ? { cron: rule.cron } : { every: durationOf(toMillis(rule.every!, 'every')) }),
        time_zone: rule.timeZone ?? '', on_gap: rule.onGap ?? '', on_overlap: rule.onOverlap ?? '',
        ...(rule.startAt ? { start_at: timestampOf(rule.startAt) } : {}),
        ...(rule.endAt ? { end_at: timestampOf(rule.endAt) } : {}),
      },
      count,
      ...(options.after ? { from: timestampOf(options.after) } : {}),
    };
    const r = await this.core.unary('recurrences', 'PreviewRecurrence', request, '');
    return (r.fire_times ?? []).map((t: any) => dateOf(t)!);
  }

  /** Writes a snapshot of the broker's store into `name` under its --snapshot_dir. */
  async createSnapshot(name: string): Promise<Snapshot> {
    const r = await this.core.unary('admin', 'CreateSnapshot', { dir: name }, '');
    return { dir: r.dir, files: r.files, bytes: r.bytes, formatVersion: r.format_version, storeId: r.store_id,
      startedAt: dateOf(r.started_at), tookMs: millisOf(r.took), shards: r.shards };
  }

  /**
   * Closes the client: waits up to `timeoutMs` for publishes in flight, stops
   * the consumers and subscriptions, closes the channels. Idempotent.
   */
  async close(timeoutMs = 5000): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.publisher.close(timeoutMs);
    await Promise.all([...this.consumers].map((c) => c.close()));
    await Promise.all([...this.subscriptions].map((s) => s.close(timeoutMs)));
    this.core.router.close();
  }

  private split(built: Record<string, unknown>[], shardCount: number): Map<number, number[]> {
    if (shardCount <= 1) return new Map();
    const byShard = new Map<number, number[]>();
    built.forEach((m, i) => {
      const s = shardOf(m.topic as string, shardCount);
      if (!byShard.has(s)) byShard.set(s, []);
      byShard.get(s)!.push(i);
    });
    if (byShard.size <= 1) return new Map();
    return new Map([...byShard.entries()].sort((a, b) => a[0] - b[0]));
  }

  private checkOpen(): void {
    if (this.closed) throw new HourglassError(grpc.status.CANCELLED, 'the client is closed');
  }
}
