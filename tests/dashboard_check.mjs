// dashboard_check: the coordinator's web dashboard in headless Chromium.
//
//   node tests/dashboard_check.mjs http://127.0.0.1:PORT [screenshot.png]
//
// Opens URL/dashboard (with ?key=$API_KEY when set), waits until the page
// received more than two live snapshots over /dashboard/events and its
// tokens/s chart drew data during a generation the caller runs meanwhile
// (the generated-token counter must grow between samples), checks that the
// canvases are not blank, and saves a screenshot. Exit 0 = pass; anything
// else prints why. Chromium: /usr/bin/chromium (Debian package `chromium`);
// npm `playwright-core` (package.json).
import { chromium } from "playwright-core";
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

const base = process.argv[2];
const shot = process.argv[3] || "build/artifacts/dashboard.png";
if (!base) {
  console.error("usage: node tests/dashboard_check.mjs http://127.0.0.1:PORT [out.png]");
  process.exit(2);
}
const key = process.env.API_KEY;
const url = base + "/dashboard" + (key ? "?key=" + encodeURIComponent(key) : "");
const profile = mkdtempSync(join(tmpdir(), "unicorn-chromium-"));
let browser;
function fail(msg) {
  console.error("dashboard_check: " + msg);
  process.exitCode = 1;
}
try {
  // a fresh --user-data-dir: playwright passes the profile directory itself
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const page = browser.pages()[0] || await browser.newPage();
  const errors = [];
  page.on("pageerror", e => errors.push(String(e)));
  page.on("console", m => { if (m.type() === "error") errors.push(m.text()); });
  const resp = await page.goto(url, { waitUntil: "load", timeout: 20000 });
  if (!resp || resp.status() !== 200) throw new Error("GET /dashboard: HTTP " + (resp && resp.status()));
  // live data: > 2 samples and tokens that grew while the page watched
  await page.waitForFunction(() => {
    const s = window.__unicornSamples || 0;
    const m = window.__unicornLast && window.__unicornLast.metrics;
    if (s <= 2 || !m) return false;
    const tok = m.unicorn_generated_tokens_total.series[""].value;
    if (window.__firstTok === undefined) window.__firstTok = tok;
    return tok > window.__firstTok;
  }, null, { timeout: 30000, polling: 250 });
  // every chart canvas drew something beyond its background
  const blank = await page.evaluate(() => {
    const out = [];
    for (const c of document.querySelectorAll("canvas")) {
      const g = c.getContext("2d");
      const d = g.getImageData(0, 0, c.width, c.height).data;
      const colors = new Set();
      for (let i = 0; i < d.length; i += 4 * 97) colors.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      if (c.width === 0 || colors.size < 3) out.push(c.id);
    }
    return out;
  });
  if (blank.length) fail("blank canvases: " + blank.join(", "));
  // the tokens/s chart has a non-zero value drawn (its legend shows the last sample)
  const info = await page.evaluate(() => ({
    samples: window.__unicornSamples,
    tps: document.getElementById("tps").textContent,
    tokens: document.getElementById("tokens").textContent,
    util: document.getElementById("l_util").textContent,
    state: document.getElementById("state").textContent,
  }));
  if (!/gpu/.test(info.util)) fail("the utilization chart has no gpu series: " + info.util);
  if (!(Number(info.tokens) > 0)) fail("no tokens shown: " + JSON.stringify(info));
  if (errors.length) fail("page errors: " + errors.join("; "));
  mkdirSync(dirname(shot), { recursive: true });
  await page.screenshot({ path: shot, fullPage: true });
  console.error("dashboard_check: " + JSON.stringify(info) + ", screenshot " + shot);
} catch (e) {
  fail(String(e && e.stack || e));
} finally {
  if (browser) await browser.close();
  rmSync(profile, { recursive: true, force: true });
}
