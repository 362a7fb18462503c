// Drives `warrant web` in Debian's Chromium through playwright-core, as a person would, and prints
// what it saw as one JSON document for the Rust test (suite::web::browser) to assert whole.
//
// env: PLAYWRIGHT_CORE (the module's directory), WEB_URL (the printed address with its token),
// MODEL (a scripted transcript), MODE ("full" or "xss-only"), SCREENSHOTS (a directory, or empty).
"use strict";
const { chromium } = require(process.env.PLAYWRIGHT_CORE);
const http = require("http");
const fs = require("fs");
const os = require("os");
const path = require("path");

const url = process.env.WEB_URL;
const base = url.split("/?token=")[0];
const mode = process.env.MODE || "full";
const shots = process.env.SCREENSHOTS || "";

// A page of another origin on this machine (same site, other port: SameSite=Strict still sends
// the cookie, so only the Origin check stands between it and the API).
function evilServer() {
  return new Promise(resolve => {
    const srv = http.createServer((req, res) => {
      const page = `<!doctype html><title>evil</title><script>
        (async () => {
          const out = {};
          try { const r = await fetch(${JSON.stringify(base)} + "/api/runs", { credentials: "include" }); out.read = "read " + r.status; }
          catch (e) { out.read = "blocked"; }
          try {
            await fetch(${JSON.stringify(base)} + "/api/runs", { method: "POST", mode: "no-cors", credentials: "include",
              headers: { "Content-Type": "text/plain" }, body: JSON.stringify({ model: "scripted:/x", task: "from evil" }) });
            out.post = "sent";
          } catch (e) { out.post = "failed"; }
          document.title = JSON.stringify(out);
        })();
      </script>`;
      res.writeHead(200, { "Content-Type": "text/html" });
      res.end(page);
    });
    srv.listen(0, "127.0.0.1", () => resolve(srv));
  });
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "warrant-chromium-"));
  const context = await chromium.launchPersistentContext(dir, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1440, height: 900 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const out = { dialogs: [], pageerrors: [] };
  const page = context.pages()[0] || await context.newPage();
  page.on("dialog", async d => { out.dialogs.push(d.message()); await d.dismiss(); });
  page.on("pageerror", e => out.pageerrors.push(String(e.message)));
  try {
    await page.goto(url);
    await page.waitForSelector("#who:not(:empty)");
    out.address_after_sign_in = page.url().replace(base, "");
    out.cookie_visible_to_script = await page.evaluate(() => document.cookie);
    out.signed_in_as = await page.textContent("#who");

    // A run, started from the page, watched live.
    await page.fill("#run-model", process.env.MODEL);
    await page.fill("#run-task", "web tour");
    await page.click("#run-start");
    await page.waitForURL(/#\/run\/run-/);
    const run = page.url().split("#/run/")[1];
    await page.waitForSelector(".event.model_responded .said");
    out.model_text_shown = await page.textContent(".event.model_responded .said");
    out.injected_elements = await page.evaluate(() => document.querySelectorAll("main img, main script, main iframe").length);
    if (mode === "xss-only") {
      // The negative control: with escaping and the CSP off, the model's markup runs.
      await page.waitForEvent("dialog", { timeout: 30000 }).catch(() => {});
      out.run = run;
      return out;
    }
    await page.waitForSelector("#run-status.parked");
    if (shots) await shoot(page, "run");

    // The question the agent asked (its text carries markup): answered from the page.
    await page.goto(base + "/#/requests");
    await page.waitForSelector("#requests-table a");
    if (shots) await shoot(page, "requests");
    await page.click("#requests-table a");
    await page.waitForSelector("#answer");
    out.question_shown = await page.textContent(".request-title");
    await page.check("input[name=option][value='2']");
    await page.click("#answer");
    await page.waitForURL(/#\/run\//);

    // Then the command it wants to run: the exact action, who is asked, the confinement.
    await page.waitForSelector("#run-status.parked");
    await page.goto(base + "/#/requests");
    await page.waitForSelector("#requests-table a");
    await page.click("#requests-table a");
    await page.waitForSelector("#approve-once");
    out.approval_body_has_argv = (await page.textContent(".request-body")).includes("argv:");
    out.asked_of = await page.textContent("#asked-of");
    out.confinement_shown = (await page.textContent("#confinement")).includes("no network");
    out.why_shown = await page.textContent("#reasons");
    if (shots) await shoot(page, "approval");
    await page.click("#approve-once");
    await page.waitForURL(/#\/run\//);
    await page.waitForSelector("#run-status.completed", { timeout: 60000 });
    out.completed = true;

    // The audit trail: the approval's record, then verify.
    await page.goto(base + "/#/audit");
    await page.fill("#audit-run", run);
    await page.click("#audit-query");
    await page.waitForSelector("#audit-records tr:nth-child(2)");
    const trail = await page.textContent("#audit-records");
    out.audit_has_web_approval = trail.includes('"via": "web"');
    await page.click("#verify");
    await page.waitForFunction(() => document.querySelector("#verify-result").textContent.includes('"ok"'));
    out.verified = JSON.parse(await page.textContent("#verify-result")).ok;
    if (shots) await shoot(page, "audit");
    await page.goto(base + "/#/policy");
    await page.fill("#explain-action", "fs.write");
    await page.fill("#explain-target", "src/main.rs");
    await page.click("#explain");
    await page.waitForFunction(() => document.querySelector("#explain-result").textContent.length > 0);
    if (shots) await shoot(page, "policy");
    await page.goto(base + "/#/conversations");
    await page.waitForSelector("#runs-table tr:nth-child(2)");
    if (shots) await shoot(page, "conversations");

    // A request without the CSRF header, from the page's own origin with its cookie.
    out.without_csrf = await page.evaluate(async () => {
      const r = await fetch("/api/runs", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ model: "scripted:/x", task: "no csrf" }) });
      return { status: r.status, code: (await r.json()).code };
    });

    // A page of another origin tries to read and to drive the API.
    const srv = await evilServer();
    const evil = await context.newPage();
    await evil.goto("http://127.0.0.1:" + srv.address().port + "/");
    await evil.waitForFunction(() => document.title.startsWith("{"));
    out.cross_origin = JSON.parse(await evil.title());
    await evil.close();
    srv.close();
    out.runs_after = await page.evaluate(async () => (await (await fetch("/api/runs")).json()).runs.map(r => r.task));
    out.run = run;
    return out;
  } finally {
    await context.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function shoot(page, name) {
  await page.waitForTimeout(200);
  for (const width of [1440, 375]) {
    await page.setViewportSize({ width, height: width === 1440 ? 900 : 812 });
    await page.screenshot({ path: path.join(shots, `${name}-${width}.png`), fullPage: false });
  }
  await page.setViewportSize({ width: 1440, height: 900 });
}

main().then(out => { process.stdout.write(JSON.stringify(out) + "\n"); }, e => {
  process.stdout.write(JSON.stringify({ error: String(e && e.stack || e) }) + "\n");
  process.exitCode = 1;
});
