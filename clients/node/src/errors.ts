import { Metadata, status } from '@grpc/grpc-js';

/** The names of gRPC's status codes, by number. */
const CODE_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(status)
    .filter(([, v]) => typeof v === 'number')
    .map(([k, v]) => [v as number, k]),
);

/** The name of a gRPC status code: 5 → "NOT_FOUND". */
export function codeName(code: number): string {
  return CODE_NAMES[code] ?? `CODE_${code}`;
}

/**
 * Every error of a call to the broker: the gRPC status code, its name, the
 * broker's message (word for word), and the trailing metadata.
 */
export class HourglassError extends Error {
  /** The gRPC status code (`status.NOT_FOUND` is 5, ...). */
  readonly code: number;
  /** The code's name: "NOT_FOUND", "UNAVAILABLE", ... */
  readonly codeName: string;
  /** The broker's message, unchanged (the `message` adds the code's name). */
  readonly details: string;
  /** The call's trailing metadata (empty when there was none). */
  readonly metadata: Metadata;

  constructor(code: number, details: string, metadata?: Metadata, options?: { cause?: unknown }) {
    super(`${codeName(code)}: ${details}`);
    this.name = 'HourglassError';
    this.code = code;
    this.codeName = codeName(code);
    this.details = details;
    this.metadata = metadata ?? new Metadata();
    if (options?.cause !== undefined) {
      Object.defineProperty(this, 'cause', { value: options.cause, enumerable: false, writable: true });
    }
  }

  /** The first value of trailing metadata `key`, or undefined. */
  trailer(key: string): string | undefined {
    const values = this.metadata.get(key);
    if (values.length === 0) return undefined;
    const v = values[0];
    return typeof v === 'string' ? v : v.toString();
  }
}

/** An error thrown by grpc-js (a ServiceError, or a status) as an HourglassError. */
export function fromGrpc(err: unknown): HourglassError {
  if (err instanceof HourglassError) return err;
  const e = err as { code?: number; details?: string; message?: string; metadata?: Metadata };
  if (e && typeof e.code === 'number') {
    return new HourglassError(e.code, e.details ?? e.message ?? '', e.metadata, { cause: err });
  }
  return new HourglassError(status.UNKNOWN, String((err as Error)?.message ?? err), undefined, { cause: err });
}
