// The console's session page follows a session with the chat page's Connection, read-only:
// a command is refused before it reaches the store or the socket.
import assert from "node:assert/strict";
import { test } from "node:test";

globalThis.window ??= { location: { href: "http://console.test/admin/" } };
globalThis.WebSocket ??= { CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3 }; // only its constants are read here
const { Connection } = await import("../../static/chat/connection.js");
const { CommandError, SessionStore } = await import("../../static/chat/store.js");

function connection(readOnly) {
  const store = new SessionStore({ sessionId: "s1" });
  const conn = new Connection({ url: "/ws/sessions/s1/", snapshotUrl: "/api/sessions/s1/snapshot/", store, readOnly });
  conn.ws = { readyState: 1, sent: [], send(frame) { this.sent.push(frame); }, close() {} }; // an open socket
  return { store, conn };
}

test("a read-only connection refuses every command and sends nothing", async () => {
  const { store, conn } = connection(true);
  try {
    await assert.rejects(conn.send("prompt", { text: "hi" }), (e) => e instanceof CommandError && e.code === "read_only");
    assert.deepEqual(store.outbox, []);
    assert.deepEqual(conn.ws.sent, []);
    assert.equal(conn.url.protocol, "ws:");
  } finally {
    conn.stop();
  }
});

test("the chat page's connection still sends its commands", () => {
  const { conn } = connection(false);
  try {
    conn.send("label", { entryId: "e1", label: "x" }); // pending until an ack; the frame is on the wire
    assert.equal(JSON.parse(conn.ws.sent[0]).type, "label");
  } finally {
    conn.stop();
  }
});
