import { status } from '@grpc/grpc-js';
import type { BackoffOptions, Deadline, MessageInput, Payload, Receipt, When } from './types';
import { dateOf, durationOf, timestampOf, toMillis } from './time';

/** Requests built from the client's arguments, and answers read. */

export function payloadBytes(p: Payload | undefined, what: string): Buffer {
  if (p === undefined) return Buffer.alloc(0);
  if (typeof p === 'string') return Buffer.from(p, 'utf8');
  if (Buffer.isBuffer(p)) return p;
  if (p instanceof Uint8Array) return Buffer.from(p.buffer, p.byteOffset, p.byteLength);
  throw new TypeError(`${what}: payload must be a Buffer, a Uint8Array or a string`);
}

/** The `when` fields of a Message or RescheduleRequest. */
export function whenFields(w: When, what: string, required = false): Record<string, unknown> {
  if (w.delay !== undefined && w.deliverAt !== undefined) {
    throw new TypeError(`${what}: give delay or deliverAt, not both`);
  }
  if (w.delay !== undefined) return { delay: durationOf(toMillis(w.delay, `${what}: delay`)) };
  if (w.deliverAt !== undefined) {
    if (!(w.deliverAt instanceof Date)) throw new TypeError(`${what}: deliverAt must be a Date`);
    return { deliver_at: timestampOf(w.deliverAt) };
  }
  if (required) throw new TypeError(`${what}: give delay or deliverAt`);
  return {};
}

const ON_EXPIRE: Record<string, string> = { drop: 'ON_EXPIRE_DROP', dead_letter: 'ON_EXPIRE_DEAD_LETTER' };

/** The deadline fields of a Message. Whether the deadline comes after the due time is the broker's to check. */
export function deadlineFields(d: Deadline, what: string): Record<string, unknown> {
  if (d.ttl !== undefined && d.expireAt !== undefined) {
    throw new TypeError(`${what}: give ttl or expireAt, not both`);
  }
  const fields: Record<string, unknown> = {};
  if (d.ttl !== undefined) fields.ttl = durationOf(toMillis(d.ttl, `${what}: ttl`));
  if (d.expireAt !== undefined) {
    if (!(d.expireAt instanceof Date)) throw new TypeError(`${what}: expireAt must be a Date`);
    fields.expire_at = timestampOf(d.expireAt);
  }
  if (d.onExpire !== undefined) {
    const value = typeof d.onExpire === 'string' && Object.hasOwn(ON_EXPIRE, d.onExpire) ? ON_EXPIRE[d.onExpire] : undefined;
    if (value === undefined) throw new TypeError(`${what}: onExpire must be 'drop' or 'dead_letter', not ${JSON.stringify(d.onExpire)}`);
    fields.on_expire = value;
  }
  return fields;
}

export function message(m: MessageInput, what: string): Record<string, unknown> {
  if (typeof m.topic !== 'string') throw new TypeError(`${what}: topic must be a string`);
  if (m.id !== undefined && typeof m.id !== 'string') throw new TypeError(`${what}: id must be a string`);
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(m.headers ?? {})) {
    if (typeof v !== 'string') throw new TypeError(`${what}: header ${k} must be a string`);
    headers[k] = v;
  }
  return {
    topic: m.topic,
    payload: payloadBytes(m.payload, what),
    headers,
    id: m.id ?? '',
    ...whenFields(m, what),
    ...deadlineFields(m, what),
  };
}

/** Whether a publish may be sent again after an unknown outcome: every message has an id. */
export function repeatable(messages: { id?: string }[]): boolean {
  return messages.length > 0 && messages.every((m) => !!m.id);
}

export function receipt(r: any): Receipt {
  return { id: r.id, deliverAt: dateOf(r.deliver_at) ?? new Date(0), duplicate: !!r.duplicate };
}

/** Ends of a subscription's stream after which it subscribes again. */
export const RECONNECT_CODES = new Set([status.UNAVAILABLE, status.CANCELLED, status.RESOURCE_EXHAUSTED]);

/** Initial metadata the broker sends once a subscription is accepted. */
export const SUBSCRIBED_METADATA = 'hourglass-subscribed';

export class Backoff {
  readonly initial: number;
  readonly max: number;
  readonly multiplier: number;
  constructor(o: BackoffOptions = {}) {
    this.initial = toMillis(o.initial ?? 50, 'backoff.initial');
    this.max = toMillis(o.max ?? 5000, 'backoff.max');
    this.multiplier = o.multiplier ?? 2;
    if (!(this.initial > 0) || !(this.max >= this.initial) || !(this.multiplier >= 1)) {
      throw new RangeError('backoff: need 0 < initial <= max and multiplier >= 1');
    }
  }
  /** The wait in ms before the attempt after `failures` (1 or more) failed ones, jittered to 50-100 %. */
  wait(failures: number): number {
    let nominal = this.initial;
    for (let i = 1; i < failures && nominal < this.max; i++) nominal = Math.min(nominal * this.multiplier, this.max);
    return nominal * (0.5 + Math.random() * 0.5);
  }
}

export function sleep(ms: number, signal?: { aborted: boolean; onAbort: (f: () => void) => void }): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, Math.max(0, ms));
    signal?.onAbort(() => { clearTimeout(t); resolve(); });
  });
}
