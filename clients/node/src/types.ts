import type { ChannelOptions } from '@grpc/grpc-js';
import type { DurationInput } from './time';

/** A payload: bytes, or a string sent as its UTF-8 bytes. */
export type Payload = Buffer | Uint8Array | string;

/** TLS settings. `true` trusts the system's CAs. */
export interface TlsOptions {
  /** The CAs to trust: PEM (a Buffer, or a string holding "-----BEGIN"), or a path to a PEM file. Default: the system's. */
  ca?: Buffer | string;
  /** A client certificate chain for mutual TLS (PEM or a path), with `key`. */
  cert?: Buffer | string;
  /** The client certificate's private key (PEM or a path). */
  key?: Buffer | string;
  /** The name to check the broker's certificate against, instead of the address's host. */
  serverName?: string;
}

/** How the client waits between attempts (publishes with ids, subscriptions reopening). */
export interface BackoffOptions {
  /** The first wait. Default 50 ms. */
  initial?: DurationInput;
  /** The longest wait. Default 5 s. */
  max?: DurationInput;
  /** Each wait is the previous one times this (then jittered to 50-100 %). Default 2. */
  multiplier?: number;
}

export interface HourglassOptions {
  /** The broker's address (host:port), or for a cluster several of its nodes. */
  addrs?: string[];
  /** One address, or several separated by commas; an alternative to `addrs`. */
  addr?: string;
  /** Bearer token sent with every call (brokers with --auth_tokens). */
  token?: string;
  /** TLS: `true` for the system's CAs, or TlsOptions. Default: plaintext. */
  tls?: boolean | TlsOptions;
  /** Deadline of each call, of each message published, and of opening a subscription, retries included. Default "10s". */
  timeout?: DurationInput;
  /** Waits between attempts. Default 50 ms doubling to 5 s, jittered. */
  backoff?: BackoffOptions;
  /** The most single-message publishes in flight at once; `publish` waits past it. Default 1000. */
  maxPublishesInFlight?: number;
  /** Extra gRPC channel options, e.g. keepalive. */
  channelOptions?: ChannelOptions;
}

/** When a message comes due: at most one of `delay` and `deliverAt`; neither means now. */
export interface When {
  /** Delay after the broker accepts the message: milliseconds or "10s", "5m", "1h30m"... */
  delay?: DurationInput;
  /** Absolute due time. */
  deliverAt?: Date;
}

/** What a group does with a message it has not received by its deadline: drop it (as an ack would end it there), or move it to `<topic>.dlq`. */
export type OnExpire = 'drop' | 'dead_letter';

/**
 * A message's deadline: at most one of `ttl` and `expireAt`; neither means none. A consumer
 * group that has not received the message by then never does (nor again after a nack or an
 * ack timeout). A deadline at or before the due time is the broker's INVALID_ARGUMENT.
 */
export interface Deadline {
  /** Deadline after the broker accepts the message (not after its due time): milliseconds or "10s", "5m", "1h30m"... */
  ttl?: DurationInput;
  /** Absolute deadline. */
  expireAt?: Date;
  /** What a group does with the message past its deadline: 'drop' (the default) or 'dead_letter' to `<topic>.dlq`. Ignored without a deadline. */
  onExpire?: OnExpire;
}

export interface PublishOptions extends When, Deadline {
  /** Idempotency key, unique within the topic (at most 128 bytes); a pending message with this id makes the publish a duplicate. */
  id?: string;
  /** Application headers, delivered unchanged. */
  headers?: Record<string, string>;
}

/** One message of `publishBatch`. */
export interface MessageInput extends PublishOptions {
  topic: string;
  payload?: Payload;
}

/** What the broker answers a stored (or deduplicated) message. */
export interface Receipt {
  /** The message's id: yours, or the one the broker assigned ("hg-..."). */
  id: string;
  /** When it comes due (millisecond precision). */
  deliverAt: Date;
  /** True if a message with this id was already pending: nothing new was stored, this is that one's receipt. */
  duplicate: boolean;
}

export interface SubscribeOptions {
  /** Credit: the most unacknowledged deliveries at once (0: the broker's default, 100). */
  maxInFlight?: number;
  /** A delivery not acknowledged within this comes again. Default: the broker's --ack_timeout (30 s). */
  ackTimeout?: DurationInput;
  /** Closes the subscription when aborted. */
  signal?: AbortSignal;
  /** Reopen the stream after it breaks (default true); false ends the subscription with the error. */
  reconnect?: boolean;
}

export interface ConsumeOptions extends SubscribeOptions {
  /** How many handlers run at once. Default 1. */
  concurrency?: number;
  /** Redelivery delay of a message whose handler threw: a duration, or a function of the message and the error. Default 0 (at once). */
  retryDelay?: DurationInput | ((message: { attempt: number; id: string }, error: unknown) => DurationInput);
  /** Called with each handler error (after the nack is queued), and with the error the subscription ends with. */
  onError?: (error: unknown, message?: { id: string; topic: string; attempt: number }) => void;
}

export type MessageState = 'scheduled' | 'ready' | 'in_flight' | 'dead';

export interface Percentiles { p50: number; p90: number; p99: number; max: number }

export interface GroupStats { group: string; ready: number; inFlight: number; consumers: number; ackRate: number }

export interface TopicStats {
  topic: string; scheduled: number; ready: number; inFlight: number; deadLettered: number;
  publishRate: number; deliveryRate: number;
  /** Delivery time minus due time over the last minute, in ms. */
  lateness: Percentiles;
  groups: GroupStats[];
}

export interface Stats {
  topics: TopicStats[]; startedAt?: Date; version: string; formatVersion: number; storeId: string;
  serving: boolean; notServingReason: string;
}

export interface TopicInfo { name: string; scheduled: number; groups: number; ready: number; inFlight: number; deadLettered: number }

export interface GroupInfo { topic: string; name: string; createdAt?: Date; ready: number; inFlight: number; consumers: number }

export interface GroupDelivery { group: string; state: MessageState | 'unspecified'; attempt: number; redeliverAt?: Date }

export interface MessageInfo {
  id: string; topic: string; state: MessageState | 'unspecified'; deliverAt?: Date; publishedAt?: Date;
  payloadSize: number; headers: Record<string, string>; payloadPreview: Buffer; groups: GroupDelivery[]; attempt: number;
}

export interface MessagePage { messages: MessageInfo[]; /** Undefined on the last page. */ nextPageToken?: string }

export interface ListOptions {
  /** For 'ready' and 'in_flight': only this group's. */
  group?: string;
  dueFrom?: Date;
  dueTo?: Date;
  /** 1 to 1000; default 100. */
  pageSize?: number;
  pageToken?: string;
}

export interface ScheduleBucket { start: Date; count: number }
export interface Schedule { buckets: ScheduleBucket[]; total: number }

/**
 * A recurring rule (Recurrences.PreviewRecurrence): exactly one of `cron`
 * (5 fields, 6 with seconds first, or "@daily" and the like, read in
 * `timeZone`) and `every` (a UTC period of at least 1 s).
 */
export interface RecurrenceRule {
  cron?: string;
  every?: DurationInput;
  /** IANA name; default UTC. */
  timeZone?: string;
  /** A local time the clocks skip: "fire" (default, as the gap ends) or "skip". */
  onGap?: 'fire' | 'skip';
  /** A local time that happens twice: "auto" (default) or "both". */
  onOverlap?: 'auto' | 'both';
  /** The rule fires only at times in [startAt, endAt). */
  startAt?: Date;
  endAt?: Date;
}

export interface NextFireTimesOptions {
  /** Fire times strictly after this; default the broker's now. */
  after?: Date;
  /** How many, 1 to 1000; default 10. */
  count?: number;
}

export interface Snapshot {
  dir: string; files: number; bytes: number; formatVersion: number; storeId: string;
  startedAt?: Date; tookMs?: number; shards: number;
}
