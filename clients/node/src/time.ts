/**
 * Durations and instants as the client takes them, and as protobuf's
 * Duration and Timestamp carry them.
 */

/** A duration: milliseconds, or a string such as "250ms", "10s", "1m30s", "2h", "1d". */
export type DurationInput = number | string;

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/y;

/** Milliseconds of `d`; throws a TypeError for what is not a duration. */
export function toMillis(d: DurationInput, what = 'duration'): number {
  if (typeof d === 'number') {
    if (!Number.isFinite(d)) throw new TypeError(`${what}: ${d} is not a finite number of milliseconds`);
    return d;
  }
  if (typeof d !== 'string') throw new TypeError(`${what}: expected milliseconds or a string like "10s", got ${typeof d}`);
  const text = d.trim();
  let sign = 1;
  let i = 0;
  if (text.startsWith('-')) { sign = -1; i = 1; }
  if (text.length === i) throw new TypeError(`${what}: "${d}" is not a duration (e.g. "500ms", "10s", "1h30m")`);
  let total = 0;
  while (i < text.length) {
    PART.lastIndex = i;
    const m = PART.exec(text);
    if (!m) throw new TypeError(`${what}: "${d}" is not a duration (e.g. "500ms", "10s", "1h30m")`);
    total += parseFloat(m[1]) * UNITS[m[2]];
    i = PART.lastIndex;
  }
  return sign * total;
}

/** protobuf's Duration (as proto-loader writes messages). */
export interface PbDuration { seconds: number | string; nanos: number }
/** protobuf's Timestamp. */
export interface PbTimestamp { seconds: number | string; nanos: number }

/** A Duration of `ms` milliseconds (whole nanoseconds). */
export function durationOf(ms: number): PbDuration {
  const totalNanos = Math.round(ms * 1e6);
  const seconds = Math.trunc(totalNanos / 1e9);
  return { seconds, nanos: totalNanos - seconds * 1e9 };
}

/** A Timestamp of `date`. */
export function timestampOf(date: Date): PbTimestamp {
  const ms = date.getTime();
  if (Number.isNaN(ms)) throw new TypeError('an invalid Date');
  const seconds = Math.floor(ms / 1000);
  return { seconds, nanos: (ms - seconds * 1000) * 1e6 };
}

/** The Date of a Timestamp (milliseconds: what the broker keeps); undefined when unset. */
export function dateOf(t: PbTimestamp | null | undefined): Date | undefined {
  if (!t) return undefined;
  return new Date(Number(t.seconds) * 1000 + Math.floor(t.nanos / 1e6));
}

/** Milliseconds of a Duration; undefined when unset. */
export function millisOf(d: PbDuration | null | undefined): number | undefined {
  if (!d) return undefined;
  return Number(d.seconds) * 1000 + d.nanos / 1e6;
}
