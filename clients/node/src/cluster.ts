import * as grpc from '@grpc/grpc-js';
import { HourglassError } from './errors';
import { shardOf } from './shards';
import { services } from './proto';

/**
 * Cluster mode: which node each call goes to.
 *
 * A cluster keeps each shard on three nodes and only the shard's primary
 * serves its topics. Another node answers a call about such a topic with
 * UNAVAILABLE and the trailers `hourglass-primary: host:port` (and
 * `hourglass-epoch`, `hourglass-shards`), having done nothing; a dead node
 * answers nothing. Every node serves Cluster.GetClusterMap (a single
 * hourglassd answers it UNIMPLEMENTED).
 *
 * The client keeps one channel per node address it used (an Endpoint) and a
 * Router that says where each call goes: to the primary of the topic's
 * shard once it knows the shard count (above 1) and that primary, else to
 * the current node. A redirect is followed at once; an UNAVAILABLE without
 * one makes the client read the cluster map from the nodes it knows.
 */

/** Trailer of an UNAVAILABLE from a node that is not the primary: where the primary is. */
export const PRIMARY_TRAILER = 'hourglass-primary';
/** Trailer of a refusal that depends on the shard: the cluster's shard count. */
export const SHARDS_TRAILER = 'hourglass-shards';
/** The most shards a cluster has; a larger count from a server is taken as none. */
export const MAX_SHARDS = 4096;
/** Redirects of one call (or of opening a subscription) after its first attempt. */
export const MAX_REDIRECTS = 3;
/** How long each node may take to answer GetClusterMap, in ms. */
export const REDISCOVER_TIMEOUT_MS = 2000;

/** One node: its address and the clients of the three services, on one channel. */
export interface Endpoint {
  readonly address: string;
  readonly broker: grpc.Client & Record<string, any>;
  readonly admin: grpc.Client & Record<string, any>;
  readonly cluster: grpc.Client & Record<string, any>;
  readonly recurrences: grpc.Client & Record<string, any>;
}

/** How the client's channels are made. */
export interface ChannelSettings {
  addresses: string[];
  credentials: grpc.ChannelCredentials;
  options: grpc.ChannelOptions;
}

export function makeEndpoint(settings: ChannelSettings, address: string): Endpoint {
  const { Broker, Admin, Cluster, Recurrences } = services();
  const broker = new Broker(address, settings.credentials, settings.options);
  const channel = broker.getChannel();
  const admin = new Admin(address, settings.credentials, { ...settings.options, channelOverride: channel });
  const cluster = new Cluster(address, settings.credentials, { ...settings.options, channelOverride: channel });
  const recurrences = new Recurrences(address, settings.credentials, { ...settings.options, channelOverride: channel });
  return { address, broker: broker as any, admin: admin as any, cluster: cluster as any, recurrences: recurrences as any };
}

/** A valid shard count in a trailer or map; 0 for none. */
export function boundedShardCount(value: unknown): number {
  const n = typeof value === 'number' ? value : Number(value);
  return Number.isInteger(n) && n > 0 && n <= MAX_SHARDS ? n : 0;
}

/** The primary an UNAVAILABLE named (hourglass-primary); undefined otherwise. */
export function redirectAddress(error: HourglassError): string | undefined {
  if (error.code !== grpc.status.UNAVAILABLE) return undefined;
  return error.trailer(PRIMARY_TRAILER) || undefined;
}

/** The shard count a refusal gave (hourglass-shards); 0 if none. */
export function shardCountOf(error: HourglassError): number {
  const v = error.trailer(SHARDS_TRAILER);
  return v === undefined || !/^\d+$/.test(v) ? 0 : boundedShardCount(Number(v));
}

export function log(message: string): void {
  if (process.env.HOURGLASS_DEBUG) process.stderr.write(`hourglass: ${message}\n`);
}

/** Where each call goes (see the module comment). Never blocks. */
export class Router {
  private readonly endpoints = new Map<string, Endpoint>();
  private current: Endpoint;
  private shardCount = 0;
  private shards: (Endpoint | undefined)[] = [];
  private known: string[];
  /** Whether the client talks to a cluster: several addresses, a redirect, or a map read. */
  cluster: boolean;

  constructor(private readonly settings: ChannelSettings) {
    this.current = this.endpoint(settings.addresses[0]);
    this.known = [...settings.addresses];
    this.cluster = settings.addresses.length > 1;
  }

  /** Where calls about `topic` go now ("" for calls about no topic). */
  route(topic = ''): Endpoint {
    const slot = this.slot(topic);
    return (slot !== undefined ? this.shards[slot] : undefined) ?? this.current;
  }

  currentEndpoint(): Endpoint { return this.current; }
  knownShardCount(): number { return this.shardCount; }

  /** Whether a new stream after a broken one should wait for its node (single broker only). */
  waitForReady(): boolean { return !this.cluster; }

  endpoint(address: string): Endpoint {
    let e = this.endpoints.get(address);
    if (!e) {
      e = makeEndpoint(this.settings, address);
      this.endpoints.set(address, e);
    }
    return e;
  }

  /**
   * After a call about `topic` on `failed` ended with `error`: keeps the shard
   * count it gave, and if it named a primary other than `failed`, routes the
   * shard there and returns its endpoint.
   */
  follow(failed: Endpoint, error: HourglassError, topic = ''): Endpoint | undefined {
    return this.followNamed(failed, redirectAddress(error), shardCountOf(error), topic);
  }

  followNamed(failed: Endpoint, primary: string | undefined, shardCount: number, topic: string): Endpoint | undefined {
    this.learnCount(shardCount);
    if (!primary || primary === failed.address) return undefined;
    this.cluster = true;
    return this.switchTo(this.slot(topic), primary, `${failed.address} said so`);
  }

  /** The nodes to ask for the cluster map, in order, each once. */
  candidates(failed: Endpoint, topic = ''): string[] {
    const ordered = [this.route(topic).address, failed.address, ...this.settings.addresses, ...this.known];
    return [...new Set(ordered)];
  }

  /** Takes in a cluster map; where calls about `topic` go now, unless that is still `failed`. */
  learn(map: any, failed: Endpoint, topic = ''): Endpoint | undefined {
    const nodes = new Map<string, string>();
    for (const n of map.nodes ?? []) if (n.address) nodes.set(n.id, n.address);
    this.cluster = true;
    if (nodes.size > 0) this.known = [...nodes.values()];
    this.learnCount(boundedShardCount(map.shard_count));
    const why = `the cluster map of ${map.node || '?'} says so`;
    for (const shard of map.shards ?? []) {
      const primary = nodes.get(shard.primary);
      if (!primary || primary === failed.address) continue;
      if (shard.shard === 0) this.switchTo(undefined, primary, why);
      if (shard.shard < this.shards.length) this.switchTo(shard.shard, primary, why);
    }
    const route = this.route(topic);
    return route.address === failed.address ? undefined : route;
  }

  close(): void {
    for (const e of this.endpoints.values()) e.broker.close();
  }

  private slot(topic: string): number | undefined {
    if (!topic || this.shardCount <= 1) return undefined;
    return shardOf(topic, this.shardCount);
  }

  private learnCount(count: number): void {
    if (count <= 0 || count > MAX_SHARDS || count === this.shardCount) return;
    log(`the cluster has ${count} shards`);
    this.shardCount = count;
    this.shards = count > 1 ? new Array(count).fill(undefined) : [];
  }

  private switchTo(slot: number | undefined, address: string, why: string): Endpoint {
    const e = this.endpoint(address);
    if (slot === undefined) {
      if (this.current !== e) log(`calls go to ${address}, the primary, now: ${why}`);
      this.current = e;
    } else {
      if (this.shards[slot] !== e) log(`calls about shard ${slot} go to ${address}, its primary, now: ${why}`);
      this.shards[slot] = e;
    }
    return e;
  }
}
