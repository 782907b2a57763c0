// The page: session list | conversation + status + composer | resizable tree sidebar.

import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { Boundary } from "./boundary.js";
import { useStore } from "./hooks.js";
import { Conversation } from "./conversation.js";
import { Composer } from "./composer.js";
import { PlanPanel } from "./plan_panel.js";
import { ClarifyPanel } from "./clarify_panel.js";
import { ApprovalPanel } from "./approval_panel.js";
import { StatusBar } from "./status.js";
import { TreeSidebar } from "./tree.js";
import { SessionList } from "./sessions.js";
import { ArchivedBanner } from "./session_search.js";
import { SummarizeDialog } from "./dialogs.js";
import { InlineEditor } from "./inline_editor.js";
import { sessionApi } from "../api.js";
import { startSession } from "../draft.js";
import { continueTarget, firstLine, LONG_BRANCH_MESSAGES, messagesLeft } from "../tree_model.js";
import { followLatest } from "./conversation.js";
import { retryTarget } from "../conversation_model.js";
import { countUserText, parseSlash } from "../composer_model.js";
import { Pickers, chosenModel, promptChoice } from "./pickers.js";
import { QueuedMessages } from "./queued.js";
import { Shortcuts } from "./shortcuts.js";
import { ThemeToggle } from "./theme_toggle.js";
import { compactSession } from "../compact.js";
import { plainText } from "../plain_text.js";
import { shownTitle } from "../session_title.js";
import { ShareDialog } from "./share_dialog.js";
import { SettingsDialog } from "./settings.js";
import { t } from "../i18n.js";

const NARROW = "(max-width: 900px)";

function stored(key, fallback) {
  try {
    const value = localStorage.getItem(`neta.${key}`);
    return value === null ? fallback : JSON.parse(value);
  } catch {
    return fallback;
  }
}

function remember(key, value) {
  try {
    localStorage.setItem(`neta.${key}`, JSON.stringify(value));
  } catch {
    /* private mode: nothing to keep */
  }
}

function Resizer({ width, setWidth }) {
  const onPointerDown = (event) => {
    event.preventDefault();
    const startX = event.clientX;
    const startWidth = width;
    const move = (e) => setWidth(clampWidth(startWidth + (startX - e.clientX)));
    const up = () => {
      window.removeEventListener("pointermove", move);
      window.removeEventListener("pointerup", up);
    };
    window.addEventListener("pointermove", move);
    window.addEventListener("pointerup", up);
  };
  const onKeyDown = (event) => {
    if (event.key === "ArrowLeft") setWidth(clampWidth(width + 24));
    else if (event.key === "ArrowRight") setWidth(clampWidth(width - 24));
  };
  return html`<div class="resizer" role="separator" aria-orientation="vertical" aria-label=${t("Resize the tree")} aria-valuenow=${width} aria-valuemin="200" aria-valuemax="900" tabindex="0" onPointerDown=${onPointerDown} onKeyDown=${onKeyDown}></div>`;
}

function clampWidth(value) {
  return Math.round(Math.max(200, Math.min(Math.min(900, window.innerWidth * 0.6), value)));
}

function TopBar({ store, data, treeOpen, sessionsOpen, toggleTree, toggleSessions, onRename, onShare, onSettings }) {
  useStore(store, ["session", "leaf"]);
  const [renaming, setRenaming] = useState(false);
  const [pinned, setPinned] = useState(Boolean(data.session?.pinned));
  const pin = async () => {
    try {
      setPinned((await sessionApi(data.sessionId).pin(!pinned)).pinned);
    } catch {
      /* the list says nothing changed */
    }
  };
  // A session with nothing in it yet (a draft, or `/?agent=X`'s fresh one) is a "New session".
  const shown = store.snapshot
    ? shownTitle(store, data.session?.title)
    : { text: data.session?.title || (data.session?.messageCount ? t("Untitled session") : t("New session")), named: Boolean(data.session?.title) };
  const named = shown.named;
  const title = shown.text;
  useEffect(() => {
    document.title = `${title} · Neta`;
  }, [title]);
  const csrf = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/)?.[1] ?? "";
  return html`
    <header class="topbar">
      <button type="button" class="icon-button" aria-label=${t("Sessions")} aria-pressed=${sessionsOpen} aria-controls="sessions" onClick=${toggleSessions}>☰</button>
      <a class="brand" href=${data.urls.home}>Neta</a>
      ${renaming
        ? html`<${InlineEditor} id="title-input" label=${t("Session title")} className="title-editor" maxLength="500" placeholder=${t("Session title")}
            initial=${store.snapshot?.session?.title || data.session?.title || ""}
            onDone=${async (value) => {
              setRenaming(false);
              if (value) await onRename(value);
            }} />`
        : html`<h1 class=${named ? "session-title" : "session-title provisional"} title=${named ? title : t("{title} (not named yet)", { title })}>${title}</h1>
            ${data.sessionId ? html`<button type="button" class="icon-button rename-button" aria-label=${t("Rename the session")} title=${t("Rename")} onClick=${() => setRenaming(true)}>✎</button>
              <button type="button" class="icon-button pin-button" aria-label=${pinned ? t("Unpin the session") : t("Pin the session")} aria-pressed=${pinned} title=${pinned ? t("Pinned to the top of your sessions") : t("Pin to the top of your sessions")} onClick=${pin}>${pinned ? "★" : "☆"}</button>` : null}`}
      <span class="muted agent-name">${data.agent.name} · ${data.agent.model.displayName}</span>
      <span class="spacer"></span>
      ${data.sessionId ? html`<button type="button" class="icon-button share-button" aria-label=${t("Share or download")} title=${t("Share a read-only link, download (JSONL, Markdown, HTML)")} onClick=${onShare}><span class="wide-only">${t("Share")}</span><span class="narrow-only" aria-hidden="true">⇪</span></button>` : null}
      <button type="button" class="icon-button settings-button" aria-label=${t("Settings")} title=${t("Custom instructions, language, Enter sends")} onClick=${onSettings}>⚙</button>
      <${ThemeToggle} username=${data.user.username} />
      <button type="button" class="icon-button tree-toggle" aria-label=${t("Session tree")} aria-pressed=${treeOpen} onClick=${toggleTree}>⎇<span class="wide-only"> ${t("Tree")}</span></button>
      ${data.urls.console ? html`<a class="muted small-link" href=${data.urls.console}>${t("Console")}</a>` : null}
      <form method="post" action=${data.urls.logout} class="logout">
        <input type="hidden" name="csrfmiddlewaretoken" value=${decodeURIComponent(csrf)} />
        <button type="submit" class="link-button" title=${t("Signed in as {user}", { user: data.user.username })}>${t("Sign out")}</button>
      </form>
    </header>
  `;
}

export function App({ data, store, connection }) {
  const narrow = useMemo(() => window.matchMedia(NARROW), []);
  const [isNarrow, setNarrow] = useState(narrow.matches);
  const [treeOpen, setTreeOpen] = useState(() => (narrow.matches ? false : stored("treeOpen", true)));
  const [sessionsOpen, setSessionsOpen] = useState(() => (narrow.matches ? false : stored("sessionsOpen", true)));
  const [treeWidth, setTreeWidth] = useState(() => stored("treeWidth", 340));
  const [draft, setDraftState] = useState(() => {
    const text = takeComposerText(data.sessionId ?? `draft:${data.agent.name}`);
    return { text, version: text ? 1 : 0, focus: Boolean(text) };
  });
  const [banner, setBanner] = useState(null);
  const bannerRef = useRef(null);
  bannerRef.current = banner;
  const [ask, setAsk] = useState(null);
  const [dialog, setDialog] = useState(null); // "share" | "settings" | null
  const [notice, setNotice] = useState(null);
  // The next prompt's model and thinking level (per session), Enter-to-send, queued messages.
  const [choice, setChoiceState] = useState(() => stored(`choice.${data.sessionId}`, null));
  const setChoice = (next) => {
    setChoiceState(next);
    remember(`choice.${data.sessionId}`, next);
  };
  // Enter sends, except on touch screens (a phone keyboard's Enter is its new line; Send sends):
  // the default until the user picks (remembered).
  const [enterSends, setEnterSendsState] = useState(() => stored("enterSends", !window.matchMedia("(pointer: coarse)").matches));
  const setEnterSends = (value) => {
    setEnterSendsState(value);
    remember("enterSends", value);
  };
  const [queued, setQueued] = useState([]);
  // After a reload the messages queued on the running agent come from the server (they are
  // kept there until the run takes them), not from this page's memory.
  useEffect(() => {
    if (!data.sessionId) return undefined;
    let asked = false;
    return store.subscribe((changes) => {
      if (asked || !changes.has("run") || !store.running) return;
      asked = true;
      api.queued().then((body) => {
        const entries = store.snapshot?.entries ?? [];
        const items = (body.inputs ?? []).map((input) => ({ id: `server-${input.id}`, text: input.text, mode: input.mode, seen: countUserText(entries, input.text) }));
        if (items.length) setQueued((now) => (now.length ? now : items));
      }).catch(() => {});
    });
  }, [store]);
  const models = data.models ?? [];
  const noticeTimer = useRef(null);
  const api = useMemo(() => sessionApi(data.sessionId), [data.sessionId]);
  const choiceRef = useRef(choice);
  choiceRef.current = choice;
  const lookup = useCallback((id) => store.entry(id), [store]);

  useEffect(() => {
    const onChange = () => setNarrow(narrow.matches);
    narrow.addEventListener("change", onChange);
    return () => narrow.removeEventListener("change", onChange);
  }, []);
  useEffect(() => remember("treeWidth", treeWidth), [treeWidth]);
  useEffect(() => {
    if (!isNarrow || !(treeOpen || sessionsOpen)) return undefined;
    const onKey = (event) => {
      if (event.key === "Escape" && !event.defaultPrevented) {
        setTreeOpen(false);
        setSessionsOpen(false);
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [isNarrow, treeOpen, sessionsOpen]);

  // `next`: the fields to change, or a function of the draft (the composer's late updates).
  const setDraft = (next) =>
    setDraftState((d) => {
      const fields = typeof next === "function" ? next(d) : next;
      return fields === d ? d : { ...d, ...fields, version: fields.focus ? d.version + 1 : d.version };
    });
  const say = (text, kind = "error") => {
    clearTimeout(noticeTimer.current);
    setNotice({ text, kind });
    noticeTimer.current = setTimeout(() => setNotice(null), 6000);
  };

  const askSummarize = (targetId, left) =>
    new Promise((resolve) => setAsk({ target: firstLine(store.entry(targetId) ?? {}, 80), left, resolve }));

  /**
   * Whether to summarize the branch a move in the tree leaves (null: the user cancelled).
   * Only the tree's moves ask: versions, edits, regenerate and "Continue from here" are
   * everyday moves between versions of one exchange and never do. The agent's
   * `summarize_on_switch`: `ask_long` (the default) asks when the branch left holds
   * LONG_BRANCH_MESSAGES messages or more, `ask` whenever messages are left, `always`
   * summarizes them without asking, `never` never.
   */
  const decideSummarize = async (newLeafId) => {
    const policy = data.agent.summarizeOnSwitch;
    if (policy === "never" || !store.snapshot || newLeafId === null) return false;
    const left = messagesLeft(store.snapshot, lookup, newLeafId);
    if (left === 0) return false;
    if (policy === "always") return true;
    if (policy !== "ask" && left < LONG_BRANCH_MESSAGES) return false;
    return askSummarize(newLeafId, left);
  };

  const guardRun = () => {
    if (store.running) {
      say(t("A run is active: abort it (or wait) before moving in the tree."));
      return true;
    }
    return false;
  };

  const actions = useMemo(
    () => ({
      /** Move the leaf (Pi's continue rule: a prompt goes back to the editor). `fromTree`: the
       * tree's "Go here", which offers a branch summary (decideSummarize); elsewhere none. */
      async goTo(entryId, { fromTree = false } = {}) {
        if (guardRun()) return;
        const entry = store.entry(entryId);
        const target = entry ? continueTarget(entry) : { mode: "leaf" };
        const newLeaf = target.mode === "edit" ? target.branchFrom : entryId;
        const summarize = fromTree ? await decideSummarize(newLeaf) : false;
        if (summarize === null) return;
        if (summarize) say(t("Summarizing the branch you left…"), "info");
        try {
          const result = await connection.send("switch_leaf", { entryId, summarize });
          if (summarize) setNotice(null);
          if (result.editorText != null) {
            setDraft({ text: result.editorText, focus: true });
            setBanner({ fromEntryId: null, fromLabel: parentLabel(entry) });
          } else {
            dropEdit(); // the text of a "continue from here" must not be sent from the new place
          }
        } catch (e) {
          say(t("Could not move there: {error}", { error: e.message }));
        }
      },
      treeGo(entryId) {
        return actions.goTo(entryId, { fromTree: true });
      },
      continueFrom(entryId) {
        const entry = store.entry(entryId);
        if (!entry) return;
        const target = continueTarget(entry);
        if (target.mode === "edit") {
          setDraft({ text: target.text, focus: true });
          setBanner({ fromEntryId: entryId, fromLabel: parentLabel(entry) });
        } else {
          actions.goTo(entryId);
        }
      },
      async retry(entryId) {
        return actions.regenerate(entryId, "retry");
      },
      /** A new answer to the user message `entryId` answered: a sibling answer. */
      async regenerate(entryId, what = "regenerate", { prompt = false } = {}) {
        const user = prompt ? store.entry(entryId) : retryTarget(store.snapshot, lookup, entryId);
        if (!user) return say(what === "retry" ? t("Nothing to retry: no user message before this one.") : t("Nothing to answer: no user message before this one."));
        if (guardRun()) return;
        try {
          const { model } = promptChoice(models, choiceRef.current, data.agent.model);
          followLatest();
          const result = await connection.send("regenerate", model ? { entryId: user.id, model } : { entryId: user.id });
          store.setRun({ runId: result.runId, state: "queued" });
        } catch (e) {
          say(what === "retry" ? t("Retry failed: {error}", { error: e.message }) : what === "answer" ? t("Answer failed: {error}", { error: e.message }) : t("Regenerate failed: {error}", { error: e.message }));
        }
      },
      /** The `‹ n/m ›` switcher: the leaf to the newest end of that version (summary prompt as in the tree). */
      async switchVersion({ leafId }) {
        if (guardRun()) return;
        try {
          const result = await connection.send("switch_leaf", { entryId: leafId, summarize: false });
          if (result.editorText != null) setDraft({ text: result.editorText, focus: true });
        } catch (e) {
          say(t("Could not switch versions: {error}", { error: e.message }));
        }
      },
      /** Edit in place: the edited text is sent as a sibling of user message `entryId`. */
      async editSend(entryId, text) {
        if (guardRun()) return false;
        try {
          return await sendFrom(entryId, { text, images: imagesOf(store.entry(entryId) ?? {}), mode: "follow_up" });
        } catch (e) {
          say(t("Could not send the edit: {error}", { error: e.message }));
          return false;
        }
      },
      async label(entryId, label) {
        try {
          await api.label(entryId, label || null);
        } catch (e) {
          say(t("Could not label: {error}", { error: e.message }));
        }
      },
      async rename(title) {
        try {
          await api.rename(title);
        } catch (e) {
          say(t("Could not rename: {error}", { error: e.message }));
        }
      },
      async loadOlder() {
        try {
          await store.loadOlder(async (cursor, limit) => (await api.entries(cursor, limit)).results);
        } catch (e) {
          say(t("Could not load older entries: {error}", { error: e.message }));
        }
      },
      async compact(instructions = "") {
        if (guardRun()) return;
        say(t("Compacting the context…"), "info");
        try {
          await compactSession(data.sessionId, instructions);
          say(t("Context compacted."), "info");
        } catch (e) {
          say(t("Could not compact: {error}", { error: e.message }));
        }
      },
      /** A new session of the path to `entryId`. At a prompt (Pi's rule) the path before it,
       * and the prompt back in the new session's composer: no session ends unanswered. */
      async fork(entryId) {
        try {
          const entry = store.entry(entryId);
          const target = entry ? continueTarget(entry) : { mode: "leaf" };
          if (target.mode === "edit" && target.branchFrom === null) {
            keepComposerText(`draft:${data.agent.name}`, target.text);
            window.location.assign(`${data.urls.home}?agent=${encodeURIComponent(data.agent.name)}&new=1`);
            return;
          }
          const fork = await api.fork(target.mode === "edit" ? target.branchFrom : entryId);
          if (target.mode === "edit") keepComposerText(fork.sessionId, target.text);
          window.location.assign(`/sessions/${encodeURIComponent(fork.sessionId)}/`);
        } catch (e) {
          say(t("Could not fork: {error}", { error: e.message }));
        }
      },
      /** Continue an answer cut at the output limit: the model goes on in the same answer. */
      async continueAnswer(entryId) {
        if (guardRun()) return;
        try {
          followLatest();
          const result = await api.continueAnswer(entryId);
          store.setRun({ runId: result.run.runId, state: "queued" });
        } catch (e) {
          say(t("Could not continue: {error}", { error: e.message }));
        }
      },
      /** 👍 / 👎 (null: taken back) with an optional note, on answer `entryId`. */
      async feedback(entryId, rating, note = "") {
        try {
          await api.feedback(entryId, rating, note);
          say(rating ? t("Thanks: your feedback is kept with the answer.") : t("Feedback taken back."), "info");
        } catch (e) {
          say(t("Could not send feedback: {error}", { error: e.message }));
        }
      },
    }),
    [store, connection],
  );

  function parentLabel(entry) {
    // The message the new branch follows (model and thinking-level notes are not places people know).
    for (let id = entry?.parentId, seen = 0; typeof id === "string" && seen < 10_000; seen++) {
      const parent = store.entry(id);
      if (!parent) break;
      const role = parent.type === "message" ? parent.message?.role : null;
      if (role === "user" || role === "assistant") return `“${plainText(firstLine(parent, 60))}”`;
      id = parent.parentId;
    }
    return "the start of the session";
  }

  /** Give up a pending "continue from here": its banner and its text. */
  function dropEdit() {
    if (bannerRef.current) setDraft({ text: "" });
    bannerRef.current = null;
    setBanner(null);
  }

  async function prompt({ text, images, documents = [], mode, fromEntryId = null }) {
    const payload = { text, mode, ...promptChoice(models, choiceRef.current, data.agent.model) };
    if (fromEntryId) payload.fromEntryId = fromEntryId;
    followLatest(); // what is sent, and its answer, are shown: back to the bottom
    let result;
    if (images.length || documents.length) {
      if (images.length) payload.images = images;
      if (documents.length) payload.documents = documents;
      const body = await api.prompt(payload); // large frames go through the REST API
      result = { runId: body.run.runId, queuedAs: body.queuedAs };
    } else {
      result = await connection.send("prompt", payload);
    }
    if (!result.queuedAs) store.setRun({ runId: result.runId, state: "queued" });
    else {
      say(result.queuedAs === "steer" ? t("Sent to steer the running agent.") : t("Queued as a follow-up."), "info");
      const seen = countUserText(store.snapshot?.entries ?? [], text);
      setQueued((items) => [...items, { id: `${Date.now()}-${items.length}`, text, mode: result.queuedAs, seen }]);
    }
    return result;
  }

  /** Send as a new branch from `fromEntryId`'s parent (Pi's rule). An edit never asks about a summary. */
  async function sendFrom(fromEntryId, { text, images, documents = [], mode }) {
    await prompt({ text, images, documents, mode, fromEntryId });
    return true;
  }

  /** A slash command from the composer (composer_model.js parses it). */
  async function runCommand({ name, args }) {
    if (name === "tree") {
      if (!treeOpen) toggleTree();
      requestAnimationFrame(() => document.querySelector("[role=tree]")?.focus());
    } else if (name === "name") {
      await api.rename(args);
    } else if (name === "fork") {
      const leaf = store.snapshot?.leafId;
      if (!leaf) throw new Error(t("Nothing to fork yet: the session is empty."));
      await actions.fork(leaf);
    } else if (name === "compact") {
      if (store.running) throw new Error(t("A run is active: abort it (or wait) before compacting."));
      say(t("Compacting the context…"), "info");
      await compactSession(data.sessionId, args || "");
      say(t("Context compacted."), "info");
    }
  }

  const starting = useRef(false);
  const onSend = async ({ text, images, documents = [], mode }) => {
    const command = parseSlash(text);
    if (command?.error) throw new Error(command.error);
    if (!data.sessionId) {
      // A draft: the session is created by its first message (draft.js). A message sent
      // while that one is out goes back to the composer: the page is about to move.
      if (starting.current) return false;
      if (command) throw new Error(t("/{command} needs a session: send a first message.", { command: command.name }));
      const payload = { text, mode, ...promptChoice(models, choiceRef.current, data.agent.model) };
      if (images.length) payload.images = images;
      if (documents.length) payload.documents = documents;
      starting.current = true;
      let session;
      try {
        session = await startSession(data.agent.name, payload);
      } catch (e) {
        starting.current = false;
        throw e;
      }
      remember(`choice.${session.sessionId}`, choiceRef.current);
      window.location.assign(`/sessions/${encodeURIComponent(session.sessionId)}/`);
      return;
    }
    if (command) {
      await runCommand(command);
    } else if (bannerRef.current?.fromEntryId) {
      if ((await sendFrom(bannerRef.current.fromEntryId, { text, images, documents, mode })) === false) return false;
    } else {
      await prompt({ text, images, documents, mode });
    }
    // The composer cleared its text when it sent (what was typed since stays).
    bannerRef.current = null;
    setBanner(null);
    return true;
  };

  const onAbort = async () => {
    try {
      await connection.send("abort");
    } catch (e) {
      say(t("Could not abort: {error}", { error: e.message }));
    }
  };

  // Created on its first message (draft.js): a new session tried and left leaves nothing behind.
  const newSession = () => window.location.assign(`${data.urls.home}?agent=${encodeURIComponent(data.agent.name)}&new=1`);

  const toggleTree = () => {
    setTreeOpen(!treeOpen);
    if (!isNarrow) remember("treeOpen", !treeOpen);
    if (isNarrow && !treeOpen) setSessionsOpen(false);
  };
  const toggleSessions = () => {
    setSessionsOpen(!sessionsOpen);
    if (!isNarrow) remember("sessionsOpen", !sessionsOpen);
    if (isNarrow && !sessionsOpen) setTreeOpen(false);
  };

  const layout = ["layout", sessionsOpen ? "with-sessions" : "", treeOpen ? "with-tree" : "", isNarrow ? "narrow" : ""].join(" ");
  return html`
    <div class="app">
      <${TopBar} store=${store} data=${data} treeOpen=${treeOpen} sessionsOpen=${sessionsOpen} toggleTree=${toggleTree} toggleSessions=${toggleSessions} onRename=${actions.rename}
        onShare=${() => setDialog("share")} onSettings=${() => setDialog("settings")} />
      <div class=${layout} style=${`--tree-width:${treeWidth}px`}>
        ${sessionsOpen ? html`<${Boundary} name="session list" label=${t("session list")}><${SessionList} data=${data} store=${store} open=${sessionsOpen} onClose=${() => setSessionsOpen(false)} onNew=${newSession} /><//>` : null}
        <main class="chat" id="main">
          ${notice ? html`<div class=${`notice notice-${notice.kind}`} role=${notice.kind === "error" ? "alert" : "status"}>${notice.text}<button type="button" class="icon-button" aria-label=${t("Dismiss")} onClick=${() => setNotice(null)}>✕</button></div>` : null}
          <${ArchivedBanner} session=${data.session} readOnly=${data.readOnly} />
          <${Boundary} name="conversation" label=${t("conversation")}><${Conversation} store=${store} actions=${actions} agent=${data.agent} onStarter=${(text) => setDraft({ text, focus: true })} /><//>
          <${Boundary} name="status bar" label=${t("status bar")}><${StatusBar} store=${store} agent=${data.agent} onReconnect=${() => connection.reconnectNow()} onCompact=${() => actions.compact()} /><//>
          <${Boundary} name="plan" label=${t("plan")}><${PlanPanel} store=${store} /><//>
          <${Boundary} name="question" label=${t("question")}><${ClarifyPanel} store=${store} connection=${connection} /><//>
          <${Boundary} name="approval" label=${t("approval")}><${ApprovalPanel} store=${store} connection=${connection} /><//>
          <${Composer}
            store=${store}
            draft=${draft}
            setDraft=${setDraft}
            banner=${banner}
            onCancelBanner=${dropEdit}
            onSend=${onSend}
            onAbort=${onAbort}
            supportsImages=${chosenModel(models, choice, data.agent.model).supportsImages}
            enterSends=${enterSends}
            queued=${html`<${QueuedMessages} store=${store} queued=${queued} setQueued=${setQueued} />`}
            pickers=${models.length
              ? html`<${Pickers} store=${store} models=${models} agentModel=${data.agent.model} choice=${choice} setChoice=${setChoice} enterSends=${enterSends} setEnterSends=${setEnterSends} />`
              : null}
          />
        </main>
        ${treeOpen && !isNarrow ? html`<${Resizer} width=${treeWidth} setWidth=${setTreeWidth} />` : null}
        ${isNarrow && (treeOpen || sessionsOpen)
          ? html`<div class="drawer-backdrop" aria-hidden="true" onClick=${() => { setTreeOpen(false); setSessionsOpen(false); }}></div>`
          : null}
        ${treeOpen ? html`<${Boundary} name="tree" label=${t("tree")}><${TreeSidebar} store=${store} actions=${actions} open=${treeOpen} onClose=${() => setTreeOpen(false)} drawer=${isNarrow} /><//>` : null}
      </div>
      <${Shortcuts} />
      ${data.sessionId ? html`<${ShareDialog} sessionId=${data.sessionId} title=${shownTitle(store, data.session?.title).text} open=${dialog === "share"} onClose=${() => setDialog(null)} readOnly=${data.readOnly} />` : null}
      <${SettingsDialog} open=${dialog === "settings"} onClose=${() => setDialog(null)} enterSends=${enterSends} setEnterSends=${setEnterSends} data=${data} />
      <${SummarizeDialog}
        request=${ask}
        onAnswer=${(answer) => {
          ask?.resolve(answer);
          setAsk(null);
        }}
      />
    </div>
  `;
}

// Text for the composer of a page about to open (a fork at a prompt gives the prompt back).
function keepComposerText(key, text) {
  try {
    sessionStorage.setItem(`neta.composerText.${key}`, text);
  } catch {
    /* private mode: the fork opens with an empty composer */
  }
}

function takeComposerText(key) {
  try {
    const text = sessionStorage.getItem(`neta.composerText.${key}`);
    sessionStorage.removeItem(`neta.composerText.${key}`);
    return text ?? "";
  } catch {
    return "";
  }
}

function imagesOf(entry) {
  const content = entry.message?.content;
  return (Array.isArray(content) ? content : []).filter((b) => b?.type === "image").map((b) => ({ data: b.data, mimeType: b.mimeType }));
}
