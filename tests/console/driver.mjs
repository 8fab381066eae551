// Drives the operator console in headless Chromium for console_sim.rs.
// Commands arrive as JSON lines on stdin; each is answered by one JSON line
// on stdout ({"ok": true, ...} or {"ok": false, "error": "..."}). The Rust
// test decides what to check; this only does what a person at the page
// would do, and reports what the page showed.
//
//   node driver.mjs URL SCREENSHOT_DIR    (PLAYWRIGHT_CORE: playwright-core's index.mjs)
import { createInterface } from "node:readline";

const [url, screenshots] = process.argv.slice(2);
const { chromium } = await import(process.env.PLAYWRIGHT_CORE);
const profile = `${screenshots}/chromium-profile-${process.pid}`;
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  viewport: { width: 1280, height: 1000 },
  // Without the networking flags Chromium stalls on a closed network.
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
const page = context.pages()[0] || (await context.newPage());
const pageErrors = [];
page.on("pageerror", (error) => pageErrors.push(String(error)));

// The time of each click as the page saw it (wall clock, ms).
async function clickAt(locator) {
  await page.evaluate(() => {
    window.__lastClick = null;
    document.addEventListener("click", () => { window.__lastClick = Date.now(); }, { capture: true, once: true });
  });
  await locator.click();
  return page.evaluate(() => window.__lastClick);
}

const commands = {
  // The page and its endpoints without a console session.
  async open() {
    const response = await page.goto(url);
    const api = {};
    for (const [path, method] of [["/events", "GET"], ["/camera.jpg", "GET"], ["/api/stop", "POST"], ["/api/approve", "POST"]]) {
      const r = await page.request.fetch(url + path, { method, headers: { "X-AICC-Console": "1" }, data: method === "POST" ? "{}" : undefined });
      api[path] = r.status();
    }
    return { status: response.status(), login_form: await page.locator("#token").count(), stop_button: await page.locator("#stop").count(), api };
  },
  async login({ token }) {
    await page.goto(url);
    await page.fill("#token", token);
    const [response] = await Promise.all([page.waitForNavigation(), page.click("#login")]);
    const refused = await page.locator("#refused").count() ? await page.locator("#refused").textContent() : null;
    const loaded = await page.locator("#stop").count() > 0;
    if (loaded) await page.waitForFunction(() => document.getElementById("link").textContent === "live", null, { timeout: 10000 });
    return { status: response ? response.status() : null, refused, loaded };
  },
  // Waits until the live camera has shown `updates` new frames.
  async camera({ updates, timeout_ms }) {
    const seen = [];
    const deadline = Date.now() + timeout_ms;
    while (seen.length < updates + 1 && Date.now() < deadline) {
      const state = await page.evaluate(() => {
        const img = document.getElementById("camera");
        return { seq: img.dataset.seq || null, width: img.naturalWidth, height: img.naturalHeight, complete: img.complete };
      });
      if (state.seq && state.complete && state.width > 0 && !seen.some((s) => s.seq === state.seq)) seen.push(state);
      await page.waitForTimeout(100);
    }
    return { frames: seen };
  },
  // Waits until the page shows the picture an agent was given.
  async agent_frame({ timeout_ms }) {
    await page.waitForFunction(() => {
      const img = document.getElementById("agent-frame");
      return img.dataset.seq && img.complete && img.naturalWidth > 0;
    }, null, { timeout: timeout_ms });
    return await page.evaluate(() => {
      const img = document.getElementById("agent-frame");
      return { width: img.naturalWidth, height: img.naturalHeight, info: document.getElementById("agent-frame-info").textContent };
    });
  },
  async wait_approval({ tool, timeout_ms }) {
    const row = page.locator(`#approvals tbody tr[data-tool="${tool}"]`).first();
    await row.waitFor({ timeout: timeout_ms });
    return { approval_id: await row.getAttribute("data-approval-id"), text: await row.textContent() };
  },
  async decide({ approval_id, button }) {
    const row = page.locator(`#approvals tbody tr[data-approval-id="${approval_id}"]`);
    const clicked_at_ms = await clickAt(row.locator(`button.${button}`));
    await page.waitForFunction(() => /done|refused/.test(document.getElementById("action-result").textContent), null, { timeout: 10000 });
    return { clicked_at_ms, result: await page.locator("#action-result").textContent() };
  },
  async stop() {
    const clicked_at_ms = await clickAt(page.locator("#stop"));
    await page.waitForFunction(() => document.body.dataset.held === "true", null, { timeout: 10000 });
    return { clicked_at_ms, held: await page.locator("#held").isVisible(), approval_mode: await page.locator("#approval-mode").textContent() };
  },
  async release() {
    await clickAt(page.locator("#release"));
    await page.waitForFunction(() => document.body.dataset.held === "false", null, { timeout: 10000 });
    return { held: await page.locator("#held").isVisible(), approval_mode: await page.locator("#approval-mode").textContent() };
  },
  // The stream's entries of a kind (newest first), as the page shows them.
  async stream({ kind }) {
    return { entries: await page.locator(`#stream li[data-kind="${kind}"]`).allTextContents() };
  },
  async text({ selector }) {
    return { text: await page.locator(selector).textContent() };
  },
  // Requests sent as fast as the page can, with the page's session.
  async flood({ path, count, body }) {
    const statuses = {};
    const started = Date.now();
    const batch = 50;
    for (let i = 0; i < count; i += batch) {
      const results = await Promise.all(Array.from({ length: Math.min(batch, count - i) }, () =>
        page.request.fetch(url + path, { method: "POST", headers: { "X-AICC-Console": "1", "Content-Type": "application/json" }, data: JSON.stringify(body) })));
      for (const r of results) statuses[r.status()] = (statuses[r.status()] || 0) + 1;
    }
    return { statuses, elapsed_ms: Date.now() - started };
  },
  async post({ path, body, headers }) {
    const r = await page.request.fetch(url + path, { method: "POST", headers: headers || { "X-AICC-Console": "1" }, data: JSON.stringify(body || {}) });
    return { status: r.status(), body: await r.text() };
  },
  async screenshot({ name }) {
    const path = `${screenshots}/${name}`;
    await page.screenshot({ path, fullPage: true });
    return { path };
  },
  async errors() {
    return { errors: pageErrors };
  },
  async close() {
    await context.close();
    return {};
  },
};

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  let answer;
  try {
    const request = JSON.parse(line);
    const command = commands[request.cmd];
    if (!command) throw new Error(`unknown command ${request.cmd}`);
    answer = { ok: true, ...(await command(request)) };
  } catch (error) {
    answer = { ok: false, error: String(error && error.stack || error) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
  if (answer.ok && JSON.parse(line).cmd === "close") break;
}
process.exit(0);
