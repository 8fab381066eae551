// Keeps N console pages open for a while, for scripts/bench.sh's figures of
// the console's cost: N pages, each logged in (AICC_OPERATOR_TOKEN), waits SECONDS,
// prints what the pages received as one JSON line.
//   node pages.mjs URL N SECONDS   (PLAYWRIGHT_CORE: playwright-core's index.mjs)
const [url, count, seconds] = process.argv.slice(2);
const { chromium } = await import(process.env.PLAYWRIGHT_CORE);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
// One browser context per page, each logged in: a browser keeps at most 6
// HTTP/1.1 connections to one host, and each page's event stream holds one
// (docs/console.md), so ten tabs of one context would not all load.
const pages = [];
for (let i = 0; i < Number(count); i++) {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(url);
  await page.fill("#token", process.env.AICC_OPERATOR_TOKEN);
  await Promise.all([page.waitForNavigation(), page.click("#login")]);
  pages.push(page);
}
for (const page of pages) await page.waitForFunction(() => document.getElementById("link").textContent === "live", null, { timeout: 20000 });
// Ready: the measuring script starts its window now.
process.stdout.write("PAGES_READY\n");
const before = await Promise.all(pages.map((p) => p.evaluate(() => Number(document.getElementById("camera").dataset.seq || 0))));
await new Promise((resolve) => setTimeout(resolve, Number(seconds) * 1000));
const after = await Promise.all(pages.map((p) => p.evaluate(() => Number(document.getElementById("camera").dataset.seq || 0))));
process.stdout.write(JSON.stringify({ pages: pages.length, camera_frames_per_page: after.map((a, i) => a - before[i]) }) + "\n");
await browser.close();
process.exit(0);
