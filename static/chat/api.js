// The REST API from the page: same-origin session auth with Django's CSRF cookie.

export class ApiError extends Error {
  constructor(status, code, message, fields = null) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.fields = fields;
  }
}

function csrfToken() {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

export async function api(path, { method = "GET", body = undefined } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET") headers["X-CSRFToken"] = csrfToken();
  const response = await fetch(`/api/${path}`, {
    method,
    headers,
    credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 204) return null;
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = data?.error ?? {};
    throw new ApiError(response.status, error.code ?? "http_error", error.message ?? `HTTP ${response.status}`, error.fields ?? null);
  }
  return data;
}

export const sessionApi = (sessionId) => {
  const base = `sessions/${encodeURIComponent(sessionId)}/`;
  return {
    rename: (title) => api(base, { method: "PATCH", body: { title } }),
    label: (entryId, label) => api(`${base}labels/`, { method: "POST", body: { entryId, label } }),
    fork: (entryId) => api(`${base}fork/`, { method: "POST", body: { entryId } }),
    prompt: (payload) => api(`${base}prompt/`, { method: "POST", body: payload }),
    compact: (instructions) => api(`${base}compact/`, { method: "POST", body: instructions ? { instructions } : {} }),
    archive: () => api(base, { method: "PATCH", body: { status: "archived" } }),
    restore: () => api(base, { method: "PATCH", body: { status: "active" } }),
    remove: () => api(base, { method: "DELETE" }),
    entries: (cursor, limit) => api(`${base}entries/?cursor=${cursor}&limit=${limit}`),
    lastRun: () => api(`runs/?session=${encodeURIComponent(sessionId)}&limit=1`),
    queued: () => api(`${base}queued/`),
    approvals: () => api(`${base}approvals/`),
    continueAnswer: (entryId) => api(`${base}continue/`, { method: "POST", body: { entryId } }),
    feedback: (entryId, rating, note) => api(`${base}feedback/`, { method: "POST", body: { entryId, rating, note } }),
    shares: () => api(`${base}shares/`),
    share: () => api(`${base}shares/`, { method: "POST", body: {} }),
    unshare: (shareId) => api(`${base}shares/${encodeURIComponent(shareId)}/`, { method: "DELETE" }),
    pin: (pinned) => api(`${base}pin/`, { method: pinned ? "PUT" : "DELETE" }),
  };
};

export const sessionsApi = {
  list: (agent) => api(`sessions/?agent=${encodeURIComponent(agent)}&status=active&limit=50`),
  archived: (agent) => api(`sessions/?agent=${encodeURIComponent(agent)}&status=archived&limit=50`),
  create: (agent) => api("sessions/", { method: "POST", body: { agent } }),
  search: (agent, q) => api(`sessions/search/?${agent ? `agent=${encodeURIComponent(agent)}&` : ""}status=active&q=${encodeURIComponent(q)}`),
};
