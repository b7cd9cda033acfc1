import * as fs from 'fs';
import * as grpc from '@grpc/grpc-js';
import { HourglassError, fromGrpc } from './errors';
import { ChannelSettings, Endpoint, MAX_REDIRECTS, REDISCOVER_TIMEOUT_MS, Router, log } from './cluster';
import { Backoff, sleep } from './protocol';
import { toMillis } from './time';
import type { HourglassOptions, TlsOptions } from './types';

function pem(value: Buffer | string | undefined, what: string): Buffer | undefined {
  if (value === undefined) return undefined;
  if (Buffer.isBuffer(value)) return value;
  if (typeof value !== 'string') throw new TypeError(`tls.${what}: a Buffer, PEM text or a path`);
  if (value.includes('-----BEGIN')) return Buffer.from(value);
  return fs.readFileSync(value);
}

export function addressesOf(o: HourglassOptions): string[] {
  const given = o.addrs ?? (o.addr !== undefined ? o.addr.split(',') : []);
  const addresses = given.map((a) => a.trim()).filter((a) => a.length > 0);
  if (addresses.length === 0) throw new TypeError('Hourglass: give addrs (host:port of the broker, or of nodes of a cluster)');
  return [...new Set(addresses)];
}

/** What every part of a client shares: settings, the router, unary calls. */
export class ClientCore {
  readonly router: Router;
  readonly backoff: Backoff;
  readonly timeoutMs: number | undefined;
  private readonly token: string | undefined;
  private readonly rediscovering = new Map<string, Promise<Endpoint | undefined>>();

  constructor(options: HourglassOptions) {
    const addresses = addressesOf(options);
    if (options.token !== undefined && (typeof options.token !== 'string' || !/^[!-~]+$/.test(options.token))) {
      throw new TypeError('Hourglass: a token is printable ASCII without spaces, and not empty');
    }
    this.token = options.token;
    this.backoff = new Backoff(options.backoff);
    this.timeoutMs = options.timeout === undefined ? 10_000 : toMillis(options.timeout, 'timeout');
    const channelOptions: grpc.ChannelOptions = {
      // The broker bounds what it sends; gRPC's 4 MiB default could refuse a large delivery.
      'grpc.max_receive_message_length': -1,
      'grpc.initial_reconnect_backoff_ms': Math.max(1, Math.round(this.backoff.initial)),
      'grpc.max_reconnect_backoff_ms': Math.max(1, Math.round(this.backoff.max)),
      // Connections of this client's own, not shared with other clients of the process.
      'grpc.use_local_subchannel_pool': 1,
      ...options.channelOptions,
    };
    let credentials = grpc.credentials.createInsecure();
    if (options.tls) {
      const tls: TlsOptions = options.tls === true ? {} : options.tls;
      credentials = grpc.credentials.createSsl(pem(tls.ca, 'ca') ?? null, pem(tls.key, 'key') ?? null,
        pem(tls.cert, 'cert') ?? null);
      if (tls.serverName) channelOptions['grpc.ssl_target_name_override'] = tls.serverName;
    }
    const settings: ChannelSettings = { addresses, credentials, options: channelOptions };
    this.router = new Router(settings);
  }

  /** The metadata of a call: the token, and whether it waits for its node to be reachable. */
  metadata(waitForReady = false): grpc.Metadata {
    const m = new grpc.Metadata();
    if (this.token) m.set('authorization', `Bearer ${this.token}`);
    if (waitForReady) m.setOptions({ waitForReady: true });
    return m;
  }

  deadline(): number {
    return this.timeoutMs === undefined ? Infinity : Date.now() + this.timeoutMs;
  }

  /** One unary call on one endpoint. */
  callOnce(endpoint: Endpoint, service: 'broker' | 'admin' | 'cluster' | 'recurrences', method: string, request: unknown,
    deadline: number, waitForReady: boolean): Promise<any> {
    return new Promise((resolve, reject) => {
      const options: grpc.CallOptions = deadline === Infinity ? {} : { deadline: new Date(deadline) };
      endpoint[service][method](request, this.metadata(waitForReady), options, (err: unknown, response: unknown) => {
        if (err) reject(fromGrpc(err));
        else resolve(response);
      });
    });
  }

  /**
   * A unary call about `topic` where calls about it go, following the primary
   * in a cluster; a `repeatable` one (a publish whose messages all have ids)
   * is retried after UNAVAILABLE with backoff, all within one deadline.
   */
  async unary(service: 'broker' | 'admin' | 'recurrences', method: string, request: unknown, topic: string,
    repeatable = false): Promise<any> {
    const deadline = this.deadline();
    let endpoint = this.router.route(topic);
    let redirects = 0;
    let failures = 0;
    let waitForReady = false;
    for (;;) {
      let failure: HourglassError;
      try {
        return await this.callOnce(endpoint, service, method, request, deadline, waitForReady);
      } catch (e) {
        failure = fromGrpc(e);
      }
      let primary = this.router.follow(endpoint, failure, topic);
      if (failure.code !== grpc.status.UNAVAILABLE) throw failure;
      if (redirects < MAX_REDIRECTS) {
        if (!primary) {
          const found = await this.rediscover(endpoint, deadline, topic);
          primary = repeatable ? found : undefined;
        }
        if (primary && Date.now() < deadline) {
          redirects++;
          endpoint = primary;
          waitForReady = false;
          continue;
        }
      }
      if (!repeatable) throw failure;
      failures++;
      const wait = this.backoff.wait(failures);
      if (Date.now() + wait >= deadline) throw failure;
      log(`a publish with ids to ${endpoint.address} failed (${failure.message}); again in ${Math.round(wait)} ms`);
      await sleep(wait);
      endpoint = this.router.route(topic);
      waitForReady = this.router.waitForReady();
    }
  }

  /**
   * Asks the nodes the client knows for the cluster map (each for at most 2 s,
   * all before `deadline`) and moves later calls to the primaries it names.
   * Where calls about `topic` go now; undefined if no node named another
   * primary, or a node is a single hourglassd. Concurrent asks share one.
   */
  rediscover(failed: Endpoint, deadline: number, topic = '', stop?: () => boolean): Promise<Endpoint | undefined> {
    const key = `${failed.address}\u0000${topic}`;
    let running = this.rediscovering.get(key);
    if (!running) {
      running = this.readMaps(failed, deadline, topic, stop).finally(() => this.rediscovering.delete(key));
      this.rediscovering.set(key, running);
    }
    return running;
  }

  private async readMaps(failed: Endpoint, deadline: number, topic: string, stop?: () => boolean) {
    for (const address of this.router.candidates(failed, topic)) {
      if (stop?.()) return undefined;
      const left = deadline - Date.now();
      if (left <= 0) return undefined;
      const endpoint = this.router.endpoint(address);
      let map: any;
      try {
        map = await this.callOnce(endpoint, 'cluster', 'GetClusterMap', {},
          Date.now() + Math.min(REDISCOVER_TIMEOUT_MS, left), false);
      } catch (e) {
        if (fromGrpc(e).code === grpc.status.UNIMPLEMENTED) return undefined;
        continue;
      }
      const primary = this.router.learn(map, failed, topic);
      if (primary) return primary;
    }
    return undefined;
  }
}
