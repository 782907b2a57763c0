import { formatDate, t } from "./i18n.js";
// The session list's groups (pure, node-tested): pinned sessions first, then by the day they
// were last used — Today, Yesterday, Previous 7 days, Previous 30 days, then by month.

const DAY = 24 * 60 * 60 * 1000;

function startOfDay(date) {
  return new Date(date.getFullYear(), date.getMonth(), date.getDate()).getTime();
}

/** The group a session last used at `iso` falls in, seen at `now`. */
export function dateGroup(iso, now = new Date()) {
  const when = new Date(iso);
  if (Number.isNaN(when.getTime())) return t("Older");
  const today = startOfDay(now);
  const time = when.getTime();
  if (time >= today) return t("Today");
  if (time >= today - DAY) return t("Yesterday");
  if (time >= today - 7 * DAY) return t("Previous 7 days");
  if (time >= today - 30 * DAY) return t("Previous 30 days");
  return formatDate(when, { year: "numeric", month: "long" });
}

/** [{label, sessions}] in display order; `sessions` newest first within each group. */
export function groupSessions(sessions, now = new Date()) {
  const pinned = sessions.filter((s) => s.pinned);
  const rest = sessions.filter((s) => !s.pinned).sort((a, b) => String(b.updatedAt).localeCompare(String(a.updatedAt)));
  const groups = [];
  const pinnedLabel = t("Pinned");
  if (pinned.length) groups.push({ label: pinnedLabel, sessions: pinned });
  for (const session of rest) {
    const label = dateGroup(session.updatedAt, now);
    const last = groups[groups.length - 1];
    if (last && last.label === label && last.label !== pinnedLabel) last.sessions.push(session);
    else groups.push({ label, sessions: [session] });
  }
  return groups;
}
