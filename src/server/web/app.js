// The web page of tantivy-dedup: the list page (/), a story (/story/{root}) and the check before
// publishing (/check), drawn from the public HTTP API only. The pages are built from the
// <template>s of index.html; every text that comes from the API goes in with textContent, and
// the one piece of markup the API sends (the <em> marks of a list page's snippet) is rebuilt
// element by element, so no other markup can get through. The state of a page is in its
// address (history.pushState), so every view can be linked to and reloaded.
"use strict";

/// Where the read key is kept: for this tab only, and gone when it closes.
const KEY_STORAGE = "tantivy-dedup.read-key";
/// Stories on a list page, members on a story page.
const PAGE_SIZE = 20;
/// The members a story's reprint path is drawn from (the API's largest page).
const REPRINT_PATH_LIMIT = 1000;
/// The list page's parameters that its address carries, as /v1/search names them, and the
/// trend window's (`window`, `end`, as /v1/trending names them).
const LIST_PARAMETERS = ["q", "sort", "from", "to", "source", "offset", "window", "end"];
/// The trend window of the trending tab and of `hot` when the address has none.
const DEFAULT_WINDOW = "6h";
/// The window's names on the page.
const WINDOW_NAMES = { "1h": "1 小时", "6h": "6 小时", "24h": "24 小时", "7d": "7 天" };
/// The story page's, as /v1/stories/{root} names them.
const STORY_PARAMETERS = ["offset", "sort", "histogram", "q"];
const DEFAULT_STORY_INTERVAL = "auto";
/// The characters of a text shown as the title of a document that has none (a post).
const TITLE_CHARS = 30;
const SVG = "http://www.w3.org/2000/svg";

const main = document.getElementById("main");

// ---- the API ---------------------------------------------------------------------------------

/// An error answer of the API ({"error": {"code", "message"}}), or a request that failed.
class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/// Calls the API with the read key when one was given; a 401 asks for the key (once for all
/// the calls waiting) and tries again with it. Answers the JSON body, or throws an ApiError.
async function api(path, init = {}) {
  for (;;) {
    const key = sessionStorage.getItem(KEY_STORAGE);
    const headers = new Headers(init.headers);
    if (key) {
      headers.set("Authorization", `Bearer ${key}`);
    }
    let response;
    try {
      response = await fetch(path, { ...init, headers });
    } catch (error) {
      throw new ApiError(0, "unreachable", `无法连接服务器：${error.message}`);
    }
    if (response.status === 401) {
      await askForKey(key !== null);
      continue;
    }
    const body = await response.json().catch(() => null);
    if (!response.ok) {
      throw new ApiError(
        response.status,
        body?.error?.code ?? `http_${response.status}`,
        body?.error?.message ?? `服务器返回 ${response.status}`,
      );
    }
    return body;
  }
}

let pendingKey = null;

/// Shows the key form and resolves once a key is entered; `rejected` says the stored key was
/// refused, which is then forgotten.
function askForKey(rejected) {
  if (pendingKey) {
    return pendingKey;
  }
  if (rejected) {
    sessionStorage.removeItem(KEY_STORAGE);
  }
  const form = document.getElementById("key-form");
  const input = document.getElementById("key-input");
  document.getElementById("key-prompt").textContent = rejected
    ? "密钥不正确，请重新输入读取密钥（read key）。"
    : "此服务需要读取密钥（read key）才能查询。密钥只保存在本标签页中。";
  form.hidden = false;
  main.dataset.state = "needs-key";
  input.focus();
  pendingKey = new Promise((resolve) => {
    form.onsubmit = (event) => {
      event.preventDefault();
      const key = input.value.trim();
      if (!key) {
        return;
      }
      sessionStorage.setItem(KEY_STORAGE, key);
      input.value = "";
      form.hidden = true;
      form.onsubmit = null;
      main.dataset.state = "loading";
      pendingKey = null;
      resolve();
    };
  });
  return pendingKey;
}

// ---- pages and navigation --------------------------------------------------------------------

/// Incremented by each page drawn, so that an answer that comes after the reader moved on is
/// dropped.
let currentPage = 0;

/// Draws the page of the current address.
function route() {
  const path = location.pathname;
  const params = new URLSearchParams(location.search);
  for (const link of document.querySelectorAll("[data-nav]")) {
    if (link.getAttribute("href") === path) {
      link.setAttribute("aria-current", "page");
    } else {
      link.removeAttribute("aria-current");
    }
  }
  if (path === "/") {
    return draw(() => listPage(params));
  }
  const story = path.match(/^\/story\/([^/]+)$/);
  if (story) {
    return draw(() => storyPage(decodeURIComponent(story[1]), params));
  }
  if (path === "/check") {
    return draw(() => checkPage(params));
  }
  return draw(async () => {
    throw new ApiError(404, "not_found", `没有这个页面：${path}`);
  });
}

/// Replaces the page with what `build` makes, or with its error. `main`'s `data-state` says
/// which (`loading`, `ready`, `error`), for people who script the page.
async function draw(build) {
  const ticket = ++currentPage;
  main.dataset.state = "loading";
  main.setAttribute("aria-busy", "true");
  let content;
  try {
    await indexZone();
    content = await build();
  } catch (error) {
    content = errorBox(error);
  }
  if (ticket !== currentPage) {
    return;
  }
  main.replaceChildren(content);
  main.removeAttribute("aria-busy");
  main.dataset.state = content.classList?.contains("error") ? "error" : "ready";
}

/// Goes to an address of the page without reloading it (the same address again is drawn
/// again, without a second history entry).
function navigate(target) {
  if (target === location.pathname + location.search) {
    history.replaceState(null, "", target);
  } else {
    history.pushState(null, "", target);
  }
  window.scrollTo(0, 0);
  route();
}

/// Whether a path is one of this page's own, drawn here rather than loaded.
function isPagePath(path) {
  return path === "/" || path === "/check" || /^\/story\/[^/]+$/.test(path);
}

document.addEventListener("click", (event) => {
  const plain = event.button === 0 && !event.metaKey && !event.ctrlKey && !event.shiftKey && !event.altKey;
  const link = event.target.closest?.("a[href]");
  if (event.defaultPrevented || !plain || !link || link.target || link.origin !== location.origin) {
    return;
  }
  if (isPagePath(link.pathname)) {
    event.preventDefault();
    navigate(link.pathname + link.search);
  }
});
window.addEventListener("popstate", route);

/// An address: `path` with `params`, changed by `changes` (null or "" removes a parameter).
function address(path, params, changes = {}) {
  const query = new URLSearchParams(params);
  for (const [name, value] of Object.entries(changes)) {
    if (value === null || value === "" || value === undefined) {
      query.delete(name);
    } else {
      query.set(name, String(value));
    }
  }
  for (const [name, value] of [...query]) {
    if (value === "") {
      query.delete(name);
    }
  }
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

/// The parameters of `params` that `names` lists and that have a value.
function pick(params, names) {
  const picked = new URLSearchParams();
  for (const name of names) {
    const value = params.get(name);
    if (value) {
      picked.set(name, value);
    }
  }
  return picked;
}

// ---- building blocks -------------------------------------------------------------------------

/// A copy of a <template>'s content.
function fromTemplate(id) {
  return document.getElementById(id).content.cloneNode(true);
}

/// A copy of a <template>'s one element.
function elementFromTemplate(id) {
  return fromTemplate(id).firstElementChild;
}

/// What the reader is told of an API error, by its code; the server's own message (English,
/// for whoever runs it) follows in small print.
const ERROR_TEXTS = {
  invalid_parameter: "请求参数有误。",
  invalid_query: "查询语句有误，请检查引号、括号和字段名。",
  invalid_date: "日期格式有误，请使用 2024-05-01 或 2024-05-01 08:00 的形式。",
  not_found: "没有找到这项内容，它可能已被删除。",
  unauthorized: "读取密钥不正确。",
  busy: "服务器正忙，请稍后再试。",
  queue_full: "服务器正忙，请稍后再试。",
  stopping: "服务器正在停止，请稍后再试。",
  shutting_down: "服务器正在停止，请稍后再试。",
  shard_unavailable: "部分分片暂时无法访问，请稍后再试。",
  internal: "服务器内部错误，请稍后再试或联系管理员。",
};

function errorBox(error) {
  const box = document.createElement("div");
  box.className = "error";
  box.setAttribute("role", "alert");
  const title = document.createElement("strong");
  title.textContent = error.status === 404 ? "未找到" : "出错了";
  const message = document.createElement("p");
  const told = ERROR_TEXTS[error.code];
  message.textContent = told ?? (error.status ? `请求失败（HTTP ${error.status}）。` : error.message);
  box.append(title, message);
  if (error.message && message.textContent !== error.message) {
    const detail = document.createElement("p");
    detail.className = "detail";
    detail.lang = "en";
    detail.textContent = error.message;
    box.append(detail);
  }
  if (error.code) {
    box.dataset.code = error.code;
  }
  return box;
}

function pad(number) {
  return String(number).padStart(2, "0");
}

/// The index's time zone, seconds east of UTC (`time_zone` of /v1/stats): its days are the
/// histograms' buckets, so times are shown in it, whatever the reader's clock. `null` until
/// known, or when /v1/stats cannot be read: the reader's clock then.
let zoneOffset = null;
let zoneAsked = null;

/// Asks /v1/stats for the index's zone, once per page load.
function indexZone() {
  zoneAsked ??= api("/v1/stats").then(
    (stats) => {
      const zone = /^([+-])(\d{2}):(\d{2})$/.exec(stats?.time_zone ?? "");
      if (zone) {
        zoneOffset = (zone[1] === "-" ? -1 : 1) * (Number(zone[2]) * 3600 + Number(zone[3]) * 60);
      }
    },
    () => {},
  );
  return zoneAsked;
}

/// The calendar fields of a time in the index's zone (the reader's when it is not known).
function clock(seconds) {
  if (zoneOffset === null) {
    const time = new Date(seconds * 1000);
    return [time.getFullYear(), time.getMonth() + 1, time.getDate(), time.getHours(), time.getMinutes()];
  }
  const time = new Date((seconds + zoneOffset) * 1000);
  return [time.getUTCFullYear(), time.getUTCMonth() + 1, time.getUTCDate(), time.getUTCHours(), time.getUTCMinutes()];
}

/// A date in the index's zone: 2024-11-25.
function formatDate(seconds) {
  const [year, month, day] = clock(seconds);
  return `${year}-${pad(month)}-${pad(day)}`;
}

/// A time in the index's zone: 2024-11-25 08:30.
function formatTime(seconds) {
  const [, , , hours, minutes] = clock(seconds);
  return `${formatDate(seconds)} ${pad(hours)}:${pad(minutes)}`;
}

/// How a chart of buckets `interval` seconds wide labels them: by date from a day up.
function bucketLabel(interval) {
  return interval >= 86400 ? formatDate : formatTime;
}

/// A histogram's heading for buckets `interval` seconds wide.
function chartHeading(interval) {
  const named = { 3600: "每小时", 86400: "每日", 604800: "每周", 2592000: "每 30 天", 31536000: "每年" };
  if (named[interval]) {
    return `${named[interval]}文章数`;
  }
  return interval % 86400 === 0
    ? `每 ${interval / 86400} 天文章数`
    : `每 ${Math.round(interval / 360) / 10} 小时文章数`;
}

/// What a document is called: its title; without one (a post), the start of its text as its
/// snippet gives it, cut at TITLE_CHARS; else `fallback`.
function titleOf(document, fallback = "（无标题）") {
  if (document.title) {
    return document.title;
  }
  const text = unescapeHtml((document.snippet ?? "").replace(/<\/?em>/g, "")).trim();
  if (!text) {
    return fallback;
  }
  const chars = [...text];
  return chars.length > TITLE_CHARS ? `${chars.slice(0, TITLE_CHARS).join("")}…` : text;
}

/// Fills a <time> element with a time in Unix seconds (or a dash without one).
function setTime(element, seconds) {
  if (typeof seconds !== "number") {
    element.textContent = "—";
    return;
  }
  element.dateTime = new Date(seconds * 1000).toISOString();
  element.textContent = formatTime(seconds);
}

/// The link to a story's page; with the list's keywords `q`, its members show where they
/// match.
function storyAddress(root, q) {
  const path = `/story/${encodeURIComponent(root)}`;
  return q ? `${path}?${new URLSearchParams({ q })}` : path;
}

/// Whether a document's url may be a link: only http and https (never javascript: and the like).
function safeUrl(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch {
    return null;
  }
}

/// Points `link` at a document's url when it may be a link ([`safeUrl`]); else leaves it
/// plain text.
function linkDocument(link, url) {
  const safe = url ? safeUrl(url) : null;
  if (safe) {
    link.href = safe;
    link.rel = "noopener noreferrer";
  }
}

const ESCAPES = { "&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&#39;": "'" };

/// Text the API sent HTML-escaped, as plain text.
function unescapeHtml(text) {
  return text.replace(/&(?:amp|lt|gt|quot|#39);/g, (escape) => ESCAPES[escape]);
}

/// Appends a list page's snippet (HTML-escaped text with the query's words in <em>…</em>): the
/// text as text nodes and each mark as an <em> element, which is all that can come through.
function appendHighlighted(parent, snippet) {
  let marked = false;
  for (const part of snippet.split(/(<\/?em>)/)) {
    if (part === "<em>" || part === "</em>") {
      marked = part === "<em>";
    } else if (part) {
      const text = document.createTextNode(unescapeHtml(part));
      if (marked) {
        const em = document.createElement("em");
        em.append(text);
        parent.append(em);
      } else {
        parent.append(text);
      }
    }
  }
}

/// Shows the highlights of `shown`, a document (GET /v1/search with `highlight`, a story with
/// `q`): its
/// title with the matched words marked in `title` when the title matched, and the fragments of
/// its body in `snippet` one after the other; without fragments, its snippet. Returns whether
/// `snippet` got any text.
function showHighlights(shown, title, snippet) {
  const highlights = shown.highlights ?? {};
  if (highlights.title?.length) {
    title.textContent = "";
    appendHighlighted(title, highlights.title[0]);
  }
  const fragments = highlights.content ?? [];
  if (!fragments.length) {
    if (shown.snippet) {
      appendHighlighted(snippet, shown.snippet);
    }
    return Boolean(shown.snippet);
  }
  for (const fragment of fragments) {
    const part = document.createElement("span");
    part.className = "fragment";
    appendHighlighted(part, fragment);
    snippet.append(part);
  }
  return true;
}

/// Adds `value` to the options of `select` unless it is one of them already.
function offerChoice(select, value) {
  if (![...select.options].some((option) => option.value === value)) {
    const option = document.createElement("option");
    option.value = value;
    option.textContent = value;
    select.append(option);
  }
}

/// Fills a pager: previous and next links and where we are, or hides it for one page.
function fillPager(nav, total, offset, pageAddress) {
  const pages = Math.ceil(total / PAGE_SIZE);
  if (pages <= 1) {
    nav.hidden = true;
    return;
  }
  const current = Math.floor(offset / PAGE_SIZE) + 1;
  const link = (label, target, rel) => {
    const anchor = document.createElement("a");
    anchor.textContent = label;
    anchor.href = pageAddress(target);
    anchor.rel = rel;
    return anchor;
  };
  const position = document.createElement("span");
  position.textContent = `第 ${current} / ${pages} 页`;
  nav.replaceChildren(
    current > 1 ? link("← 上一页", Math.max(0, offset - PAGE_SIZE), "prev") : "",
    position,
    current < pages ? link("下一页 →", offset + PAGE_SIZE, "next") : "",
  );
}

/// A bar chart of histogram buckets ({start, articles}) `interval` seconds wide, as inline
/// SVG `width` units wide (drawn at the width of its box, so about the size it will show, for
/// legible labels): one bar a bucket (its time and count as its tooltip), the first and last
/// times below and the highest count beside.
function barChart(buckets, interval, label, width) {
  const height = Math.round(width * 0.26);
  const left = 34;
  const bottom = 22;
  const top = 8;
  const plotWidth = width - left - 4;
  const plotHeight = height - top - bottom;
  const highest = Math.max(1, ...buckets.map((bucket) => bucket.articles));
  const slot = plotWidth / Math.max(1, buckets.length);
  const gap = slot > 6 ? Math.min(4, slot * 0.2) : 0;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("class", "bars");
  svg.setAttribute("role", "img");
  const total = buckets.reduce((sum, bucket) => sum + bucket.articles, 0);
  const span = buckets.length
    ? `${label(buckets[0].start)} 至 ${label(buckets[buckets.length - 1].start + interval)}`
    : "";
  svg.setAttribute("aria-label", `${span}，共 ${total} 篇，最多 ${highest} 篇`);
  const element = (name, attributes, text) => {
    const node = document.createElementNS(SVG, name);
    for (const [key, value] of Object.entries(attributes)) {
      node.setAttribute(key, String(value));
    }
    if (text !== undefined) {
      node.textContent = text;
    }
    svg.append(node);
    return node;
  };
  element("line", { x1: left, y1: top + plotHeight, x2: width - 4, y2: top + plotHeight, class: "axis" });
  element("text", { x: left - 6, y: top + 10, class: "tick", "text-anchor": "end" }, String(highest));
  element("text", { x: left - 6, y: top + plotHeight, class: "tick", "text-anchor": "end" }, "0");
  buckets.forEach((bucket, i) => {
    const barHeight = (bucket.articles / highest) * plotHeight;
    const bar = element("rect", {
      x: left + i * slot + gap / 2,
      y: top + plotHeight - barHeight,
      width: Math.max(0.5, slot - gap),
      height: barHeight,
      class: "bar",
    });
    const tooltip = document.createElementNS(SVG, "title");
    tooltip.textContent = `${label(bucket.start)}：${bucket.articles} 篇`;
    bar.append(tooltip);
  });
  if (buckets.length) {
    element("text", { x: left, y: height - 6, class: "tick" }, label(buckets[0].start));
    if (buckets.length > 1) {
      element(
        "text",
        { x: width - 4, y: height - 6, class: "tick", "text-anchor": "end" },
        label(buckets[buckets.length - 1].start),
      );
    }
  }
  return svg;
}

// ---- the list page ---------------------------------------------------------------------------

/// The list page of `params` (q, sort, from, to, source, offset, window, end): one line per
/// story, the sources' counts and the articles per day. Without a sort, keywords sort by
/// relevance and an empty search by newest. `sort=trending` is the trending tab: the stories
/// with articles in the window (GET /v1/trending), each line with its growth.
async function listPage(params) {
  const shown = pick(params, LIST_PARAMETERS);
  if (!shown.get("sort")) {
    shown.set("sort", shown.get("q") ? "relevance" : "newest");
  }
  const sort = shown.get("sort");
  const trending = sort === "trending";
  const keywords = shown.get("q");
  const windowed = trending || sort === "hot";
  const query = new URLSearchParams(shown);
  query.set("limit", PAGE_SIZE);
  query.set("highlight", "true");
  query.set("facets", "source");
  query.set("histogram", "auto");
  query.set("members", MEMBERS_SHOWN);
  if (trending) {
    query.delete("sort");
  } else {
    // /v1/search names the window trend_window and trend_end (read by `hot`).
    for (const [name, searchName] of [["window", "trend_window"], ["end", "trend_end"]]) {
      const value = query.get(name);
      query.delete(name);
      if (value && windowed) {
        query.set(searchName, value);
      }
    }
  }
  const page = await api(`${trending ? "/v1/trending" : "/v1/search"}?${query}`);

  const view = fromTemplate("list-page");
  for (const tab of view.querySelectorAll(".tabs .tab")) {
    if ((tab.dataset.tab === "trending") === trending) {
      tab.setAttribute("aria-current", "page");
    }
  }
  const form = view.querySelector("form.search");
  // An order or a window the address names but the lists do not (`sort=likes:desc`,
  // `window=2d`) stays chosen.
  offerChoice(form.elements.sort, sort);
  for (const name of ["q", "sort", "from", "to", "source"]) {
    form.elements[name].value = shown.get(name) ?? "";
  }
  const windowChoice = view.querySelector(".trend-window");
  windowChoice.hidden = !windowed;
  const chosenWindow = shown.get("window") ?? DEFAULT_WINDOW;
  const windows = form.elements.window;
  offerChoice(windows, chosenWindow);
  windows.value = chosenWindow;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const changes = {};
    for (const name of ["q", "sort", "from", "to", "source"]) {
      changes[name] = form.elements[name].value.trim();
    }
    if (["trending", "hot"].includes(changes.sort)) {
      changes.window = form.elements.window.value;
      changes.end = shown.get("end");
    }
    navigate(address("/", new URLSearchParams(), changes));
  });
  for (const name of ["sort", "from", "to", "window"]) {
    form.elements[name].addEventListener("change", () => form.requestSubmit());
  }

  const windowName = WINDOW_NAMES[shown.get("window") ?? DEFAULT_WINDOW] ?? shown.get("window");
  view.querySelector(".summary").textContent = trending
    ? `${keywords ? `“${keywords}”：` : ""}近 ${windowName}有新文章的报道 ${page.total_clusters} 篇，按新增文章数较前一时段的增长排序`
    : `${keywords ? `“${keywords}”：` : ""}${page.total_clusters} 篇报道，共 ${page.total_hits} 篇文章`;
  const list = view.querySelector(".clusters");
  for (const cluster of page.clusters) {
    list.append(clusterLine(cluster, windowName, keywords));
  }
  if (!page.clusters.length) {
    const empty = document.createElement("li");
    empty.className = "empty";
    empty.textContent = "没有找到匹配的报道。";
    list.append(empty);
  }
  const offset = Number(shown.get("offset")) || 0;
  fillPager(view.querySelector(".pager"), page.total_clusters, offset, (target) =>
    address("/", shown, { offset: target || null }),
  );

  if (page.histogram?.length) {
    const interval = page.histogram_interval ?? 86400;
    const chart = view.querySelector(".daily");
    chart.hidden = false;
    chart.querySelector("h2").textContent = chartHeading(interval);
    chart
      .querySelector(".chart")
      .append(barChart(page.histogram, interval, bucketLabel(interval), 300));
  }
  const sources = page.facets?.source ?? [];
  if (sources.length) {
    const facets = view.querySelector(".facets");
    facets.hidden = false;
    const values = view.querySelector("#source-values");
    for (const facet of sources) {
      const item = elementFromTemplate("facet-item");
      const link = item.querySelector("a");
      link.href = address("/", shown, { source: facet.value, offset: null });
      if (facet.value === shown.get("source")) {
        link.setAttribute("aria-current", "true");
      }
      item.querySelector(".facet-value").textContent = facet.value;
      item.querySelector(".facet-count").textContent = `${facet.articles} 篇 / ${facet.clusters} 报道`;
      facets.querySelector(".facet-list").append(item);
      const option = document.createElement("option");
      option.value = facet.value;
      values.append(option);
    }
  }
  document.title = keywords ? `${keywords} · 新闻聚类` : "新闻聚类 · tantivy-dedup";
  return view;
}

/// Outlets named on a story line; the rest are counted.
const OUTLETS_SHOWN = 5;
/// Other matching articles listed under a story line (the API's `members`).
const MEMBERS_SHOWN = 3;

/// One story of a list page, with the hooks of SPEC §4 (data-testid, data-root,
/// data-cluster-size) and, on a page that reads the trend window (`windowName`), its figures
/// (data-recent, data-growth); its link carries the list's `keywords`.
function clusterLine(cluster, windowName, keywords) {
  const line = elementFromTemplate("cluster-line");
  line.dataset.root = cluster.root;
  line.dataset.clusterSize = cluster.cluster_size;
  if (cluster.trend) {
    const trend = cluster.trend;
    line.dataset.recent = trend.recent;
    line.dataset.growth = trend.growth;
    const figures = line.querySelector(".trend");
    figures.hidden = false;
    figures.textContent =
      `近 ${windowName}新增 ${trend.recent} 篇（${trend.recent_outlets} 家媒体），` +
      `前一时段 ${trend.previous} 篇`;
    figures.classList.toggle("rising", trend.growth > 0);
  }
  const representative = cluster.representative;
  const title = line.querySelector(".cluster-title a");
  title.href = storyAddress(cluster.root, keywords);
  title.textContent = titleOf(representative);
  const snippet = line.querySelector(".snippet");
  if (!showHighlights(representative, title, snippet)) {
    snippet.remove();
  }
  const similar = line.querySelector(".similar");
  similar.textContent = `相似文章 ${cluster.cluster_size - 1} 篇`;
  similar.classList.toggle("none", cluster.cluster_size <= 1);
  setTime(line.querySelector("time"), representative.published_at);
  const outlets = cluster.sources.slice(0, OUTLETS_SHOWN).map(isolated).join("、");
  const more = cluster.sources.length - OUTLETS_SHOWN;
  line.querySelector(".outlets").textContent =
    more > 0 ? `${outlets} 等 ${cluster.sources.length} 家媒体` : outlets;
  const members = line.querySelector(".list-members");
  for (const member of cluster.members ?? []) {
    const item = elementFromTemplate("list-member");
    item.dataset.id = member.id;
    item.querySelector(".member-source").textContent = member.source ?? "（无来源）";
    const title = item.querySelector(".member-title");
    title.textContent = titleOf(member, member.id);
    linkDocument(title, member.url);
    const fragment = member.highlights?.content?.[0];
    const snippet = item.querySelector(".member-snippet");
    if (member.highlights?.title?.length) {
      title.textContent = "";
      appendHighlighted(title, member.highlights.title[0]);
    }
    if (fragment) {
      appendHighlighted(snippet, fragment);
    } else {
      snippet.remove();
    }
    setTime(item.querySelector("time"), member.published_at);
    members.append(item);
  }
  members.hidden = !members.children.length;
  return line;
}

// ---- the story page --------------------------------------------------------------------------

/// A story from GET /v1/stories/{root}: its first outlet, the spread over time, the outlets'
/// counts, the reprint path and a page of its members with their evidence.
async function storyPage(root, params) {
  const shown = pick(params, STORY_PARAMETERS);
  const query = new URLSearchParams(shown);
  query.set("limit", PAGE_SIZE);
  const path = `/v1/stories/${encodeURIComponent(root)}`;
  let story;
  let widened = false;
  try {
    story = await api(`${path}?${query}`);
  } catch (error) {
    const chosen = query.get("histogram");
    if (error.status !== 400 || !chosen || chosen === "auto") {
      throw error;
    }
    // Too fine an interval for this story's span: the server sizes one that fits.
    query.set("histogram", "auto");
    story = await api(`${path}?${query}`);
    widened = true;
  }
  // Every member is a live document of the cluster, so the cluster's size is their number.
  const total = story.cluster_size;
  // The reprint path needs every member: this page's when it holds them all.
  const everyMember =
    story.members.length >= total
      ? story.members
      : (await api(`${path}?limit=${REPRINT_PATH_LIMIT}&sort=time`)).members;

  const view = fromTemplate("story-page");
  const firstId = story.first_published?.id;
  const first = everyMember.find((member) => member.id === firstId);
  const title = first ? titleOf(first) : "（无标题）";
  view.querySelector(".story-title").textContent = title;
  document.title = `${title} · 新闻聚类`;

  const firstPublished = view.querySelector(".first-published");
  if (story.first_published) {
    firstPublished.dataset.id = story.first_published.id;
    const outlet = document.createElement("strong");
    outlet.textContent = story.first_published.source ?? "（无来源）";
    const time = document.createElement("time");
    setTime(time, story.first_published.published_at);
    firstPublished.append(outlet, " ", time);
  }
  view.querySelector(".story-size").textContent = `${story.cluster_size - 1} 篇`;
  view.querySelector(".story-outlets").textContent = `${story.outlets.length} 家`;
  view.querySelector(".story-root").textContent = story.root;

  const interval = view.querySelector("form.interval select");
  interval.value = widened ? "auto" : shown.get("histogram") ?? DEFAULT_STORY_INTERVAL;
  interval.addEventListener("change", () =>
    navigate(address(location.pathname, shown, { histogram: interval.value })),
  );
  if (widened) {
    const note = view.querySelector(".timeline .note");
    note.hidden = false;
    note.textContent = "所选间隔对这篇报道的时间跨度太细，已改为自动间隔。";
  }
  const label = bucketLabel(story.interval);
  // Drawn about as wide as it will show (its labels keep their size): the page's width on a
  // phone, at most 640 units.
  const chartWidth = Math.max(280, Math.min(640, main.clientWidth - 64));
  view
    .querySelector(".timeline .chart")
    .append(barChart(story.histogram, story.interval, label, chartWidth));

  const outletRows = view.querySelector(".outlet-counts tbody");
  for (const outlet of story.outlets) {
    const row = outletRows.insertRow();
    row.insertCell().textContent = outlet.source ?? "（无来源）";
    const count = row.insertCell();
    count.className = "num";
    count.textContent = outlet.articles;
    const time = document.createElement("time");
    setTime(time, outlet.first_published_at);
    row.insertCell().append(time);
  }

  drawReprintPath(view.querySelector(".tree"), everyMember, firstId);
  if (everyMember.length < total) {
    const note = view.querySelector(".reprint-path .note");
    note.hidden = false;
    note.textContent = `只画出最早的 ${everyMember.length} 篇（共 ${total} 篇）。`;
  }

  const sort = view.querySelector("form.member-sort select");
  sort.value = shown.get("sort") ?? "time";
  sort.addEventListener("change", () =>
    navigate(address(location.pathname, shown, { sort: sort.value, offset: null })),
  );
  const rows = view.querySelector(".members tbody");
  for (const member of story.members) {
    rows.append(memberRow(member));
  }
  const offset = Number(shown.get("offset")) || 0;
  fillPager(view.querySelector(".members .pager"), total, offset, (target) =>
    address(location.pathname, shown, { offset: target || null }),
  );
  return view;
}

/// A value of a document set among other text, between First Strong Isolate and Pop
/// Directional Isolate: direction marks of its own (an unterminated U+202E, say) end with it
/// instead of turning the text after it around. (Elements that hold one value each are
/// isolated by the style sheet.)
function isolated(text) {
  return `\u2068${text}\u2069`;
}

/// What a member's text says of where it came from: "来源：…；原标题：…".
function reprintLine(reprint) {
  if (!reprint) {
    return "";
  }
  const parts = [];
  if (reprint.source) {
    parts.push(`来源：${isolated(reprint.source)}`);
  }
  if (reprint.original_title) {
    parts.push(`原标题：${isolated(reprint.original_title)}`);
  }
  return parts.join("；");
}

/// One member of a story, with the hooks of SPEC §4 (data-testid, data-id).
function memberRow(member) {
  const row = elementFromTemplate("member-row");
  row.dataset.id = member.id;
  row.querySelector(".source").textContent = member.source ?? "（无来源）";
  setTime(row.querySelector("time"), member.published_at);
  const link = row.querySelector(".member-title a");
  link.textContent = titleOf(member, member.id);
  linkDocument(link, member.url);
  showHighlights(member, link, row.querySelector(".snippet"));
  row.querySelector(".distance").textContent = member.evidence?.distance ?? "—";
  const similarity = member.evidence?.similarity;
  row.querySelector(".similarity").textContent =
    typeof similarity === "number" ? `${Math.round(similarity * 100)}%` : "—";
  row.querySelector(".reprint").textContent = reprintLine(member.reprint) || "—";
  return row;
}

/// The reprint path as nested lists in `tree`: each member under the one it attached to in the
/// forest (`attached_to`), earliest first; a member attached to none of them starts a branch.
/// Siblings in a row from one outlet, saying the same of where they came from and with none
/// under them, are one line with their number and first and last times (an outlet that
/// reposts its own story all day is one line, not dozens).
function drawReprintPath(tree, members, firstId) {
  const byTime = [...members].sort((a, b) => (a.published_at ?? 0) - (b.published_at ?? 0));
  const known = new Set(byTime.map((member) => member.id));
  const children = new Map();
  const branches = [];
  for (const member of byTime) {
    const parent = member.attached_to;
    if (parent && parent !== member.id && known.has(parent)) {
      if (!children.has(parent)) {
        children.set(parent, []);
      }
      children.get(parent).push(member);
    } else {
      branches.push(member);
    }
  }
  // Depth first without recursion (a long chain of reprints nests deeply): each stack entry
  // is a list of siblings and the list element they go in.
  const stack = [{ siblings: branches, list: tree }];
  while (stack.length) {
    const { siblings, list } = stack.pop();
    for (const run of runsOfOneOutlet(siblings, children, firstId)) {
      const item = reprintItem(run, firstId);
      list.append(item);
      const below = run.length === 1 ? children.get(run[0].id) ?? [] : [];
      if (below.length) {
        const nested = document.createElement("ul");
        item.append(nested);
        stack.push({ siblings: below, list: nested });
      }
    }
  }
}

/// `siblings` (in time order) cut into runs drawn as one line each: members in a row from one
/// outlet, with the same reprint line and no members under them; the first outlet's member
/// always alone.
function runsOfOneOutlet(siblings, children, firstId) {
  const alone = (member) => member.id === firstId || children.has(member.id);
  const runs = [];
  for (const member of siblings) {
    const last = runs[runs.length - 1];
    const previous = last?.[last.length - 1];
    if (
      previous &&
      !alone(previous) &&
      !alone(member) &&
      previous.source === member.source &&
      reprintLine(previous.reprint) === reprintLine(member.reprint)
    ) {
      last.push(member);
    } else {
      runs.push([member]);
    }
  }
  return runs;
}

/// One line of the reprint path: the outlet, how many (when more than one), the time (first and
/// last), the first outlet's badge and what the text says of where it came from.
function reprintItem(run, firstId) {
  const [member] = run;
  const item = document.createElement("li");
  const outlet = document.createElement("strong");
  outlet.textContent = member.source ?? "（无来源）";
  item.append(outlet);
  if (run.length > 1) {
    const count = document.createElement("span");
    count.className = "count";
    count.textContent = ` ×${run.length}`;
    item.append(count);
  }
  const time = document.createElement("time");
  setTime(time, member.published_at);
  item.append(" ", time);
  if (run.length > 1) {
    const until = document.createElement("time");
    setTime(until, run[run.length - 1].published_at);
    item.append(" 至 ", until);
  }
  if (member.id === firstId) {
    const badge = document.createElement("span");
    badge.className = "badge";
    badge.textContent = "首发";
    item.append(" ", badge);
  }
  const said = reprintLine(member.reprint);
  if (said) {
    const note = document.createElement("span");
    note.className = "said";
    note.textContent = `（${said}）`;
    item.append(" ", note);
  }
  return item;
}

// ---- the check page --------------------------------------------------------------------------

/// The check before publishing: a text (and title) against the index, without indexing it.
/// `/check?text=…` fills the text in and checks it at once, so a check can be linked to; the
/// form itself posts the text and leaves it out of the address.
async function checkPage(params) {
  const view = fromTemplate("check-page");
  const form = view.querySelector("form.check");
  const result = view.querySelector(".check-result");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    main.dataset.state = "loading";
    await runCheck(form, result);
    main.dataset.state = "ready";
  });
  document.title = "发稿查重 · 新闻聚类";
  const text = params.get("text");
  if (text) {
    form.elements.content.value = text;
    form.elements.title.value = params.get("title") ?? "";
    await runCheck(form, result);
  }
  return view;
}

/// Posts the form's text to /v1/near-duplicates and lists the matches in `result`.
async function runCheck(form, result) {
  const body = { content: form.elements.content.value };
  const title = form.elements.title.value.trim();
  if (title) {
    body.title = title;
  }
  result.hidden = false;
  const summary = result.querySelector(".summary");
  const matches = result.querySelector(".matches");
  matches.replaceChildren();
  summary.textContent = "正在查重…";
  let answer;
  try {
    answer = await api("/v1/near-duplicates", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
  } catch (error) {
    summary.replaceChildren(errorBox(error));
    return;
  }
  summary.textContent = answer.matches.length
    ? `找到 ${answer.matches.length} 篇近似文章（本文指纹 ${answer.simhash}）`
    : `索引中没有与它近似的文章（本文指纹 ${answer.simhash}）。`;
  for (const match of answer.matches) {
    const item = elementFromTemplate("match-item");
    const found = match.document;
    item.dataset.id = found.id;
    item.dataset.root = found.root;
    const link = item.querySelector(".match-story");
    link.href = storyAddress(found.root);
    link.textContent = found.title || found.id;
    item.querySelector(".distance").textContent = `汉明距离 ${match.distance}`;
    item.querySelector(".source").textContent = found.source ?? "（无来源）";
    setTime(item.querySelector("time"), found.published_at);
    matches.append(item);
  }
}

route();
