// Keeps N console pages open for a while, for scripts/bench.sh's figures of
// the console's cost: logs in once (AICC_TOKEN), opens N tabs sharing the
// session, waits SECONDS, prints what the pages received as one JSON line.
//   node pages.mjs URL N SECONDS PROFILE_DIR   (PLAYWRIGHT_CORE: playwright-core's index.mjs)
const [url, count, seconds, profile] = process.argv.slice(2);
const { chromium } = await import(process.env.PLAYWRIGHT_CORE);
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
const first = context.pages()[0] || (await context.newPage());
await first.goto(url);
await first.fill("#token", process.env.AICC_TOKEN);
await Promise.all([first.waitForNavigation(), first.click("#login")]);
const pages = [first];
for (let i = 1; i < Number(count); i++) {
  const page = await context.newPage();
  await page.goto(url);
  pages.push(page);
}
for (const page of pages) await page.waitForFunction(() => document.getElementById("link").textContent === "live", null, { timeout: 20000 });
// Ready: the measuring script starts its window now.
process.stdout.write("PAGES_READY\n");
const before = await Promise.all(pages.map((p) => p.evaluate(() => Number(document.getElementById("camera").dataset.seq || 0))));
await new Promise((resolve) => setTimeout(resolve, Number(seconds) * 1000));
const after = await Promise.all(pages.map((p) => p.evaluate(() => Number(document.getElementById("camera").dataset.seq || 0))));
process.stdout.write(JSON.stringify({ pages: pages.length, camera_frames_per_page: after.map((a, i) => a - before[i]) }) + "\n");
await context.close();
process.exit(0);
