// The session socket: connects, feeds frames to the store, sends what it asks for,
// reconnects with backoff and notices a silent server (no heartbeat in time).

import { CommandError } from "./store.js";

const BACKOFF_MS = [250, 500, 1000, 2000, 4000, 8000];
const MAX_BACKOFF_MS = 15000;
const CLOSE_UNAUTHENTICATED = 4401;
const CLOSE_NOT_FOUND = 4404;

export class Connection {
  /** `readOnly` (the console's session page): subscribe and follow, never send a command. */
  constructor({ url, snapshotUrl, store, heartbeatSeconds = 25, onFatal = () => {}, onLive = () => {}, readOnly = false }) {
    this.readOnly = readOnly;
    this.snapshotUrl = snapshotUrl;
    this.url = new URL(url, window.location.href);
    this.url.protocol = this.url.protocol === "https:" ? "wss:" : "ws:";
    this.store = store;
    this.heartbeatMs = heartbeatSeconds * 1000;
    this.onFatal = onFatal;
    this.onLive = onLive;
    this.ws = null;
    this.attempt = 0;
    this.timer = null;
    this.lastFrameAt = 0;
    this.stopped = false;
    this.frames = { in: 0, out: 0 };
    this.watchdog = setInterval(() => this._checkAlive(), Math.min(5000, this.heartbeatMs));
    this._wasLive = false;
    store.subscribe((changes) => {
      if (!changes.has("connection")) return;
      const live = store.connection.state === "live";
      if (live && !this._wasLive) this.onLive();
      this._wasLive = live;
    });
  }

  start() {
    this.stopped = false;
    this._open();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.watchdog);
    this.ws?.close(1000);
  }

  /** Close the socket as a network failure would; `holdMs` keeps it down that long (tests). */
  drop({ holdMs = 0 } = {}) {
    this.holdUntil = Date.now() + holdMs;
    this.ws?.close(4000, "dropped by the client");
  }

  reconnectNow() {
    clearTimeout(this.timer);
    if (this.ws && this.ws.readyState <= WebSocket.OPEN) return;
    this.attempt = 0;
    this._open();
  }

  /** Send a command; resolves with the ack's result. */
  send(type, fields = {}) {
    if (this.readOnly) return Promise.reject(new CommandError("read_only", `${type}: this view only follows the session`));
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) {
      return Promise.reject(new CommandError("disconnected", "not connected: wait for the connection to come back"));
    }
    const done = this.store.command(type, fields);
    this._flush();
    return done;
  }

  _open() {
    clearTimeout(this.timer);
    const ws = new WebSocket(this.url);
    this.ws = ws;
    ws.addEventListener("open", () => {
      if (this.ws !== ws) return;
      this.lastFrameAt = Date.now();
      this.store.connected();
      this._flush();
    });
    ws.addEventListener("message", (event) => {
      if (this.ws !== ws) return;
      this.lastFrameAt = Date.now();
      this.frames.in += 1;
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch {
        return;
      }
      if (frame.type === "subscribed") this.attempt = 0;
      this.store.receive(frame);
      this._flush();
    });
    ws.addEventListener("close", (event) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (event.code === CLOSE_UNAUTHENTICATED) {
        this.store.disconnected({ reason: "signed out", retryInMs: null });
        this.onFatal("unauthenticated");
        return;
      }
      if (event.code === CLOSE_NOT_FOUND) {
        this.store.disconnected({ reason: "no such session", retryInMs: null });
        this.onFatal("not_found");
        return;
      }
      if (this.stopped) {
        this.store.disconnected({ reason: "closed", retryInMs: null });
        return;
      }
      const delay = Math.max(this._backoff(), (this.holdUntil ?? 0) - Date.now());
      this.attempt += 1;
      this.store.disconnected({ reason: event.reason || `closed (${event.code})`, retryInMs: delay, attempt: this.attempt });
      this.timer = setTimeout(() => this._open(), delay);
    });
  }

  _backoff() {
    const base = BACKOFF_MS[Math.min(this.attempt, BACKOFF_MS.length - 1)] ?? MAX_BACKOFF_MS;
    return Math.min(MAX_BACKOFF_MS, Math.round(base * (0.8 + Math.random() * 0.4)));
  }

  _flush() {
    const frames = this.store.takeOutbox();
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return;
    for (const frame of frames) {
      if (frame.type === "fetch_snapshot") {
        this._fetchSnapshot(this.ws);
        continue;
      }
      this.ws.send(JSON.stringify(frame));
      this.frames.out += 1;
    }
  }

  async _fetchSnapshot(ws) {
    try {
      const response = await fetch(this.snapshotUrl, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!response.ok) throw new Error(`snapshot: HTTP ${response.status}`);
      const snapshot = await response.json();
      if (this.ws !== ws) return; // the socket changed meanwhile: its own fetch follows
      this.store.snapshotFetched(snapshot);
      this._flush();
    } catch (error) {
      if (this.ws === ws) ws.close(4000, String(error.message ?? error).slice(0, 100)); // reconnect, try again
    }
  }

  _checkAlive() {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return;
    if (Date.now() - this.lastFrameAt > this.heartbeatMs * 2.5) this.ws.close(4000, "no heartbeat from the server");
  }
}
