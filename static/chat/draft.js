// A draft session (`/?agent=NAME&new=1`, "New session"): nothing exists on the server
// until the first message is sent, so a session tried and left leaves nothing behind.
// The page shows an empty conversation; the first send creates the session, prompts it
// through the REST API and opens it (its answer streams there).

import { sessionApi, sessionsApi } from "./api.js";

export function draftSnapshot(agent) {
  return {
    session: { sessionId: null, title: "", agent: agent.name, status: "active", leafEntryId: null, parentSessionId: null },
    revision: 0,
    leafId: null,
    entries: [],
    activePath: [],
    childrenByParentId: {},
    labelsByEntryId: {},
    inFlight: null,
    runtimeContext: { model: { modelId: agent.model.modelId }, thinkingLevel: agent.thinkingLevel, tokenEstimate: 0, contextWindow: agent.model.contextWindow },
    page: null,
  };
}

/** The connection of a draft: nothing to connect to yet. */
export class DraftConnection {
  start() {}
  reconnectNow() {}
  async send(type) {
    throw new Error(`send a first message before using ${type}`);
  }
}

/** The first send of a draft: create the session, prompt it, return its page's address. */
export async function startSession(agentName, payload) {
  const session = await sessionsApi.create(agentName);
  try {
    await sessionApi(session.sessionId).prompt(payload);
  } catch (error) {
    await sessionApi(session.sessionId).remove().catch(() => {}); // no empty session left behind
    throw error;
  }
  return session;
}
