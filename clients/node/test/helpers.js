'use strict';
// What the Node client's tests share: a real hourglassd, a real etcd (for
// cluster mode), certificates, and waits with deadlines. Nothing here sleeps
// to synchronise: a test waits for a delivery, a log line, a process exit
// or a condition, each with a deadline, and fails with what it saw.

const assert = require('node:assert/strict');
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');

/** How long anything that should happen may take; waiting this long is a failure. */
const WAIT = 30_000;
/** How long hourglassd or etcd may take to start or stop. */
const START_TIMEOUT = 60_000;

function hourglassd() {
  const binary = process.env.HOURGLASSD;
  assert.ok(binary && fs.existsSync(binary), `set HOURGLASSD to the hourglassd binary (got ${binary})`);
  return binary;
}

function etcdBinary() {
  const binary = process.env.HOURGLASS_ETCD || '/usr/bin/etcd';
  assert.ok(fs.existsSync(binary), `no etcd at ${binary}: install etcd-server or set HOURGLASS_ETCD`);
  return binary;
}

/** A new temporary directory, removed when the process exits. */
function tempDir(prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `hourglass-node-${prefix}-`));
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Waits until `condition()` (sync or async) is truthy, checking every 5 ms; fails naming `what`. */
async function eventually(condition, what, timeout = WAIT) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await condition();
    if (value) return value;
    if (Date.now() >= deadline) assert.fail(`${what}: not within ${timeout} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** `promise`, or a failure naming `what` after `timeout` ms. */
async function within(promise, what, timeout = WAIT) {
  let timer;
  const expired = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${timeout} ms`)), timeout);
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}

const LISTENING = /listening on \S+ \(port (\d+)\)/;

/** A real hourglassd child process on a loopback port, its data in a directory of its own. */
class Daemon {
  /** `port` 0: one the system chooses on the first start (kept for restarts). */
  constructor(dataDir, flags = [], port = 0) {
    this.dataDir = dataDir;
    this.flags = flags;
    this.port = port;
    this.process = undefined;
    this.lines = [];
    this.listeners = new Set();
  }

  get address() { return `127.0.0.1:${this.port}`; }
  output() { return this.lines.join('\n'); }

  /** Starts hourglassd (on its earlier port after the first run) and waits until it listens. */
  async start() {
    const argv = [`--listen=127.0.0.1:${this.port}`, '--metrics_listen=127.0.0.1:0', `--data_dir=${this.dataDir}`,
      '--shutdown_grace=500ms', ...this.flags];
    const first = this.lines.length;
    const child = spawn(hourglassd(), argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.process = child;
    child.exited = new Promise((resolve) => child.on('exit', (code, signal) => {
      child.exitCode_ = code;
      resolve(code ?? signal);
      this.notify();
    }));
    let buffered = '';
    const read = (chunk) => {
      buffered += chunk.toString();
      const parts = buffered.split('\n');
      buffered = parts.pop();
      for (const line of parts) this.lines.push(line);
      if (parts.length) this.notify();
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    const match = await this.awaitLog(LISTENING, START_TIMEOUT, first, child);
    this.port = Number(match[1]);
  }

  notify() { for (const l of this.listeners) l(); }

  /** The first match of `pattern` in a line logged (from line `from`), waiting for it. */
  awaitLog(pattern, timeout = START_TIMEOUT, from = 0, child = this.process) {
    return new Promise((resolve, reject) => {
      const check = () => {
        for (let i = from; i < this.lines.length; i++) {
          const m = pattern.exec(this.lines[i]);
          if (m) { done(); resolve(m); return; }
        }
        if (child && child.exitCode !== null) {
          done();
          reject(new Error(`hourglassd exited without logging ${pattern}: ${this.output()}`));
        }
      };
      const timer = setTimeout(() => { done(); reject(new Error(`hourglassd logged no ${pattern}: ${this.output()}`)); },
        timeout);
      const done = () => { clearTimeout(timer); this.listeners.delete(check); };
      this.listeners.add(check);
      check();
    });
  }

  /** SIGTERM, then its exit code (SIGKILL after START_TIMEOUT). */
  async stop() {
    const child = this.process;
    if (!child) return 0;
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), START_TIMEOUT);
    const code = await child.exited;
    clearTimeout(timer);
    return code;
  }

  /** SIGKILL, as a crash; waits for the exit. */
  async kill() {
    const child = this.process;
    if (!child) return;
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await child.exited;
  }
}

/**
 * Starts a daemon with its data in a new temporary directory. With
 * `restartable`, on a free port below the system's ephemeral range, which
 * no connection or port-0 listener takes while the daemon is down between
 * a kill and a restart.
 */
async function startDaemon(flags = [], name = 'broker', { restartable = false } = {}) {
  const daemon = new Daemon(path.join(tempDir(name), 'data'), flags, restartable ? await fixedPort() : 0);
  await daemon.start();
  return daemon;
}

/** A loopback port in [20000, 32767] (below Linux's ephemeral ports) that is free now. */
async function fixedPort() {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20000 + Math.floor(Math.random() * 12768);
    const free = await new Promise((resolve) => {
      const server = net.createServer();
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
    });
    if (free) return port;
  }
  assert.fail('no free port in [20000, 32767]');
}

/** A TCP port on 127.0.0.1 free when asked. */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** A real etcd as a one-member cluster on free loopback ports (50 ms heartbeat, 500 ms election). */
class Etcd {
  constructor(directory) {
    this.directory = directory;
    this.clientPort = 0;
    this.process = undefined;
  }

  get endpoint() { return `127.0.0.1:${this.clientPort}`; }

  async start() {
    for (let attempt = 0; attempt < 3; attempt++) {
      this.clientPort = await freePort();
      const peerPort = await freePort();
      if (peerPort === this.clientPort) continue;
      const peer = `http://127.0.0.1:${peerPort}`;
      const client = `http://127.0.0.1:${this.clientPort}`;
      fs.mkdirSync(this.directory, { recursive: true });
      const child = spawn(etcdBinary(), [
        '--name=hourglass-test', `--data-dir=${path.join(this.directory, 'data')}`,
        `--listen-client-urls=${client}`, `--advertise-client-urls=${client}`,
        `--listen-peer-urls=${peer}`, `--initial-advertise-peer-urls=${peer}`,
        `--initial-cluster=hourglass-test=${peer}`, '--initial-cluster-state=new',
        '--heartbeat-interval=50', '--election-timeout=500', '--logger=zap',
        `--log-outputs=${path.join(this.directory, 'etcd.log')}`,
      ], { stdio: 'ignore' });
      this.process = child;
      child.exited = new Promise((resolve) => child.on('exit', resolve));
      if (await this.healthy(Date.now() + START_TIMEOUT)) return;
      if (child.exitCode === null) break;
    }
    await this.stop();
    assert.fail(`etcd did not start: ${this.logTail()}`);
  }

  logTail() {
    try {
      return fs.readFileSync(path.join(this.directory, 'etcd.log'), 'utf8').split('\n').slice(-20).join('\n');
    } catch (e) {
      return `(no log: ${e.message})`;
    }
  }

  async healthy(deadline) {
    while (Date.now() < deadline) {
      if (this.process.exitCode !== null) return false;
      const ok = await new Promise((resolve) => {
        const req = http.get({ host: '127.0.0.1', port: this.clientPort, path: '/health', timeout: 250 }, (res) => {
          let body = '';
          res.on('data', (c) => { body += c; });
          res.on('end', () => {
            try { resolve(JSON.parse(body).health === 'true'); } catch { resolve(false); }
          });
        });
        req.on('error', () => resolve(false));
        req.on('timeout', () => { req.destroy(); resolve(false); });
      });
      if (ok) return true;
      await new Promise((r) => setTimeout(r, 50));
    }
    return false;
  }

  async stop() {
    if (this.process && this.process.exitCode === null && this.process.signalCode === null) {
      this.process.kill('SIGTERM');
      const timer = setTimeout(() => this.process.kill('SIGKILL'), START_TIMEOUT);
      await this.process.exited;
      clearTimeout(timer);
    }
  }
}

/** Writes `text` to `file`, readable by its owner only (hourglassd refuses token files others may read). */
function writePrivate(file, text) {
  fs.writeFileSync(file, text, { mode: 0o600 });
  fs.chmodSync(file, 0o600);
  return file;
}

/**
 * A CA and the certificates it signs: the broker's (localhost and 127.0.0.1)
 * and a client's; and another CA, which signed nothing. NAME.pem, NAME.key.
 */
class Certificates {
  constructor(directory) {
    this.directory = directory;
    this.openssl = process.env.HOURGLASS_OPENSSL || 'openssl';
    this.serial = 1;
    this.makeCa('ca', 'Hourglass Node test CA');
    this.makeCert('server', 'ca', 'localhost', 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
    this.makeCert('client', 'ca', 'node-client', 'extendedKeyUsage=clientAuth\n');
    this.makeCa('other-ca', 'Another CA');
  }

  pem(name) { return path.join(this.directory, `${name}.pem`); }
  key(name) { return path.join(this.directory, `${name}.key`); }

  run(...args) {
    execFileSync(this.openssl, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: WAIT });
  }

  makeCa(name, cn) {
    this.run('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', this.key(name), '-out', this.pem(name), '-days', '2', '-subj', `/CN=${cn}`);
  }

  makeCert(name, ca, cn, extensions) {
    const csr = path.join(this.directory, `${name}.csr`);
    const ext = path.join(this.directory, `${name}.ext`);
    fs.writeFileSync(ext, extensions);
    this.run('req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', this.key(name), '-out', csr, '-subj', `/CN=${cn}`);
    this.serial++;
    this.run('x509', '-req', '-in', csr, '-CA', this.pem(ca), '-CAkey', this.key(ca), '-set_serial', String(this.serial),
      '-days', '2', '-out', this.pem(name), '-extfile', ext);
  }
}

/**
 * The next `count` deliveries of `sub`, each checked never early (received at
 * or after its due time: one machine, one clock); fails if they do not all
 * come within `timeout`.
 */
async function take(sub, count = 1, timeout = WAIT) {
  const got = [];
  const deadline = Date.now() + timeout;
  while (got.length < count) {
    const m = await sub.receive(Math.max(1, deadline - Date.now()));
    assert.ok(m, `${got.length} of ${count} deliveries within ${timeout} ms (closed: ${sub.closed}): ${ids(got)}`);
    got.push(m);
  }
  for (const m of got) {
    assert.ok(m.receivedAt.getTime() >= m.deliverAt.getTime(),
      `${m.id} attempt ${m.attempt} came ${m.deliverAt - m.receivedAt} ms early`);
  }
  return got;
}

/** "id@attempt" of each delivery, in order. */
function ids(messages) {
  return messages.map((m) => `${m.id}@${m.attempt}`);
}

/** A seeded PRNG (mulberry32); the seed is logged by the caller. */
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

module.exports = {
  WAIT, START_TIMEOUT, Daemon, Etcd, Certificates, startDaemon, tempDir, eventually, within, take,
  ids, writePrivate, prng, freePort,
};
