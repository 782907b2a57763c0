// The session list's groups (pure, node-tested): pinned sessions first, then by the day they
// were last used — Today, Yesterday, Previous 7 days, Previous 30 days, then by month.

const DAY = 24 * 60 * 60 * 1000;

function startOfDay(date) {
  return new Date(date.getFullYear(), date.getMonth(), date.getDate()).getTime();
}

/** The group a session last used at `iso` falls in, seen at `now`. */
export function dateGroup(iso, now = new Date()) {
  const when = new Date(iso);
  if (Number.isNaN(when.getTime())) return "Older";
  const today = startOfDay(now);
  const t = when.getTime();
  if (t >= today) return "Today";
  if (t >= today - DAY) return "Yesterday";
  if (t >= today - 7 * DAY) return "Previous 7 days";
  if (t >= today - 30 * DAY) return "Previous 30 days";
  return when.toLocaleDateString(undefined, { year: "numeric", month: "long" });
}

/** [{label, sessions}] in display order; `sessions` newest first within each group. */
export function groupSessions(sessions, now = new Date()) {
  const pinned = sessions.filter((s) => s.pinned);
  const rest = sessions.filter((s) => !s.pinned).sort((a, b) => String(b.updatedAt).localeCompare(String(a.updatedAt)));
  const groups = [];
  if (pinned.length) groups.push({ label: "Pinned", sessions: pinned });
  for (const session of rest) {
    const label = dateGroup(session.updatedAt, now);
    const last = groups[groups.length - 1];
    if (last && last.label === label && last.label !== "Pinned") last.sessions.push(session);
    else groups.push({ label, sessions: [session] });
  }
  return groups;
}
