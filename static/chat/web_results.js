// The web tools' results as the chat page shows them: only what is safe to link.
//
// web_search's details hold results from the open web; a link is rendered only for an
// http(s) URL (never javascript:, data: …), and text fields are plain strings.

export function safeHttpUrl(value) {
  if (typeof value !== "string" || value.length > 8192) return null;
  let url;
  try {
    url = new URL(value);
  } catch {
    return null;
  }
  return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
}

function text(value) {
  return typeof value === "string" ? value : "";
}

/** [{title, url (safe or null), snippet, published}] from a web_search result's details. */
export function searchResults(details) {
  const results = Array.isArray(details?.results) ? details.results : [];
  return results
    .filter((r) => r && typeof r === "object")
    .map((r) => ({ title: text(r.title) || text(r.url), url: safeHttpUrl(r.url), snippet: text(r.snippet), published: text(r.published) }));
}
