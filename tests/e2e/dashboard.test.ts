/**
 * The dashboard in a real browser: headless Chromium (Debian's, installed by scripts/install-browser.sh)
 * driven by playwright-core, against an in-process broker (its live sampler on, as main.ts runs it) whose
 * topics got records over the Kafka wire, one of them in a transaction left open (InitProducerId,
 * AddPartitionsToTxn, a transactional batch, no EndTxn). Checks that the page renders the cluster, the
 * topics with their offsets and LSO lag, the open transaction's row with its age and the counts by state,
 * that it loads nothing but itself, its script, its stylesheet and its event stream, that the event stream
 * updates it in place (no reload) to show new offsets and the produce rate in its chart, that the chart
 * really draws (a screenshot with the line's colour in it), that a hostile transactional id and group id
 * are shown as text, and one transaction's page with its timeline.
 *
 * No Chromium is a failure with the fix in the message, never a skip: a dashboard nobody can see break is
 * not tested.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext } from "playwright-core";
import { simpleBatch } from "../support/batch-builder.ts";
import { countPixels, decodePng } from "../support/png.ts";
import { WireClient } from "../support/wire-client.ts";
import { openTransactionOverWire, startInProcessStack, type InProcessStack } from "./support.ts";

const CHROMIUM = "/usr/bin/chromium";
const PRODUCE_KEY = 0;

let stack: InProcessStack;
let context: BrowserContext | undefined;
let client: WireClient | undefined;
let profileDir: string | undefined;

beforeAll(async () => {
  stack = await startInProcessStack();
});

/** A name that would run script if it were ever written into the page as markup. */
const HOSTILE_ID = `<img src=x onerror="document.title='pwned'">`;

/** The y coordinates of a polyline's points (the chart's y grows downwards). */
function pointYs(points: string | null): number[] {
  return (points ?? "").trim().split(/\s+/).filter((p) => p !== "").map((p) => Number(p.split(",")[1]));
}

afterAll(async () => {
  await context?.close();
  client?.close();
  await stack?.close();
  if (profileDir) rmSync(profileDir, { recursive: true, force: true });
});

async function produce(topic: string, partition: number, count: number): Promise<number> {
  client ??= await WireClient.connect(stack.kafka.port);
  const response = await client.request(PRODUCE_KEY, 9, {
    transactionalId: null,
    acks: -1,
    timeoutMs: 10_000,
    topicData: [{ name: topic, partitionData: [{ index: partition, records: simpleBatch(count) }] }],
  });
  const result = response.responses[0].partitionResponses[0];
  expect(result.errorCode).toBe(0);
  return result.baseOffset;
}

async function launchChromium(): Promise<BrowserContext> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium is not installed at ${CHROMIUM}: run scripts/install-browser.sh (apt-get install chromium) first`);
  }
  // A fresh profile every run; launchPersistentContext is Playwright's way to pass --user-data-dir.
  profileDir = mkdtempSync(join(tmpdir(), "bunka-chromium-"));
  return chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

test("the dashboard shows the cluster, the topics' offsets and an ongoing transaction, and the event stream keeps it current with charts", async () => {
  const created = await stack.broker.services.topics.create({ name: "orders", partitions: 2 });
  expect(created.ok).toBe(true);
  expect((await stack.broker.services.topics.create({ name: "payments", partitions: 1 })).ok).toBe(true);
  expect(await produce("orders", 0, 3)).toBe(0);
  expect(await produce("orders", 0, 2)).toBe(3);
  // A transaction left open: two records on payments-0 that read_committed consumers cannot read yet.
  await stack.broker.services.txn.whenReady();
  client ??= await WireClient.connect(stack.kafka.port);
  const txn = await openTransactionOverWire(client, { transactionalId: "checkout-1", topic: "payments", partition: 0, values: ["a", "b"] });
  expect(txn.baseOffset).toBe(0);
  // A hostile transactional id (its own topic, so the rows checked below stay as they are) and group id.
  expect((await stack.broker.services.topics.create({ name: "hostile", partitions: 1 })).ok).toBe(true);
  await openTransactionOverWire(client, { transactionalId: HOSTILE_ID, topic: "hostile", partition: 0, values: ["x"] });
  const committed = await stack.broker.services.groups.commitOffsets({
    groupId: HOSTILE_ID,
    memberId: "",
    groupInstanceId: null,
    generationId: -1,
    retentionTimeMs: -1,
    apiVersion: 8,
    partitions: [{ topic: "orders", partition: 0, offset: 2, leaderEpoch: -1, metadata: null, commitTimestampMs: -1 }],
  });
  expect(committed).toEqual([0]);

  context = await launchChromium();
  const page = context.pages()[0] ?? (await context.newPage());
  const requested: string[] = [];
  page.on("request", (request) => requested.push(request.url()));
  const consoleErrors: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") consoleErrors.push(message.text());
  });
  // The page is loaded once; everything after that arrives on the event stream.
  let navigations = 0;
  page.on("framenavigated", (frame) => {
    if (frame === page.mainFrame()) navigations += 1;
  });
  const dialogs: string[] = [];
  page.on("dialog", (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });

  const response = await page.goto(`${stack.httpUrl}/`);
  expect(response?.status()).toBe(200);
  expect(await page.title()).toContain("bunka");

  // Cluster.
  await expect(page.locator('[data-field="clusterId"]').textContent()).resolves.toBe(stack.broker.services.clusterId);
  await expect(page.locator('[data-field="ready"]').textContent()).resolves.toBe("yes");
  await expect(page.locator('[data-field="counts"]').textContent()).resolves.toBe("3 / 4"); // orders (2), payments, hostile

  // The topic and its offsets: partition 0 has 5 records, partition 1 was never touched.
  const p0 = page.locator('tr.partition[data-topic="orders"][data-partition="0"]');
  await expect(p0.locator(".log-start-offset").textContent()).resolves.toBe("0");
  await expect(p0.locator(".log-end-offset").textContent()).resolves.toBe("5");
  await expect(p0.locator(".high-watermark").textContent()).resolves.toBe("5");
  await expect(p0.locator(".last-stable-offset").textContent()).resolves.toBe("5");
  await expect(p0.locator(".lso-lag").textContent()).resolves.toBe("0");
  await expect(p0.locator(".segments").textContent()).resolves.toBe("1");
  const p1 = page.locator('tr.partition[data-topic="orders"][data-partition="1"]');
  await expect(p1.locator(".state").textContent()).resolves.toBe("not opened yet");

  // The open transaction holds payments-0's LSO at its first batch. One read per row (innerText waits for
  // the row and gives its cells tab-separated): the event stream may replace the section at any time.
  const pay = (await page.locator('tr.partition[data-topic="payments"][data-partition="0"]').innerText()).split("\t").map((c) => c.trim());
  // Topic, partition, leader, log start, log end, HW, LSO, LSO lag, open txns, segments, size, producers, state.
  expect(pay.slice(0, 10)).toEqual(["payments", "0", "0", "0", "2", "2", "0", "2", "1", "1"]);

  // Transactions: the counts by state, and the open transaction's row with its producer, state and age.
  await expect(page.locator('#transactions [data-state="Ongoing"]').textContent()).resolves.toBe("Ongoing: 2"); // checkout-1 and the hostile one
  const row = page.locator('tr[data-transactional-id="checkout-1"]');
  await expect(row.getAttribute("class")).resolves.toBe("transaction"); // not "transaction timed-out"
  const cells = (await row.innerText()).split("\t").map((c) => c.trim());
  // Transactional id (with its JSON link), producer id, epoch, state, age, timeout, partitions, groups.
  expect(cells).toEqual(["checkout-1 JSON", String(txn.producerId), String(txn.producerEpoch), "Ongoing", expect.stringMatching(/^\d+s$/), "1m", "payments-0", "–"]);
  // Young and within its timeout: not hanging.
  await expect(page.locator("#hanging-none").textContent()).resolves.toBe("No hanging transactions.");

  // The hostile names are text: in the transactions table, and as a consumer group with both lags.
  await expect(page.locator(".transaction .transactional-id a").first().textContent()).resolves.toBeDefined();
  const hostileRow = page.locator("tr.transaction").filter({ hasText: "onerror" });
  await expect(hostileRow.locator(".transactional-id a").first().textContent()).resolves.toBe(HOSTILE_ID);
  const group = page.locator("#groups .group").first();
  await expect(group.locator("h3").textContent()).resolves.toStartWith(`${HOSTILE_ID} Empty`);
  const groupRow = (await group.locator("tr.group-offset").innerText()).split("\t").map((c) => c.trim());
  // Topic, partition, committed, HW, LSO, lag to HW, lag to LSO (orders-0 has 5 records, nothing open).
  expect(groupRow).toEqual(["orders", "0", "2", "5", "5", "3", "3"]);

  // The event stream is live, and the chart of produce bytes is drawn from the broker's history.
  await page.locator('#live-status[data-state="live"]').waitFor({ timeout: 15_000 });
  const produceLine = page.locator('figure[data-chart="bytes"] polyline[data-series="produce"]');
  await produceLine.first().waitFor({ timeout: 15_000 });

  // Each look at the chart waits for the next update (the body counts them), never for a time.
  const nextUpdate = async () => {
    const updates = await page.locator("body").getAttribute("data-updates");
    await page.locator(`body:not([data-updates="${updates}"])`).waitFor({ timeout: 15_000 });
  };
  // The y of a zero rate: the chart's first grid line.
  const zeroY = Number(await page.locator('figure[data-chart="bytes"] line.grid').first().getAttribute("y1"));
  const newestYs = async (count: number) => pointYs(await produceLine.last().getAttribute("points")).slice(-count);
  // A quiet second first (the records of the set-up are behind us): the line's newest point is at zero.
  for (let look = 0; (await newestYs(1))[0] !== zeroY; look++) {
    if (look > 30) throw new Error(`the produce line never came down to zero: ${JSON.stringify(await newestYs(5))}`);
    await nextUpdate();
  }

  // More records: the event stream shows them in place, with no reload and no action from us.
  expect(await produce("orders", 0, 4)).toBe(5);
  // A locator, not waitForFunction: the page's CSP forbids eval, and the test must not bypass the CSP.
  await p0.locator(".log-end-offset", { hasText: /^9$/ }).waitFor({ timeout: 15_000 });
  // The high watermark too, on that update or a later one: one that lands between the records' write and
  // their fsync shows the log end at 9 and the high watermark still at 5, as the broker has it then.
  await p0.locator(".high-watermark", { hasText: /^9$/ }).waitFor({ timeout: 15_000 });
  // The chart's data changed with them: the second those records came in is drawn above zero, among the
  // newest points, so the line is not flat.
  for (let look = 0; !(await newestYs(3)).some((y) => y < zeroY); look++) {
    if (look > 30) throw new Error(`the produce line did not rise: ${JSON.stringify(await newestYs(5))}`);
    await nextUpdate();
  }
  const ys = pointYs(await produceLine.last().getAttribute("points"));
  expect(Math.min(...ys)).toBeLessThan(Math.max(...ys));
  expect(navigations).toBe(1);

  // And it is drawn: a screenshot of the chart has the produce line's blue (#1f6fd1) in it, which nothing
  // else in the chart is (the frame and grid are grey, the background white).
  const png = decodePng(await page.locator('figure[data-chart="bytes"] svg').screenshot({ type: "png" }));
  expect(png.width).toBeGreaterThan(100);
  const blue = countPixels(png, (r, g, b) => b > 150 && r < 110 && g > 70 && g < 170 && b - r > 80);
  const background = countPixels(png, (r, g, b) => r > 245 && g > 245 && b > 245);
  expect(blue).toBeGreaterThan(10);
  expect(background).toBeGreaterThan(png.width * png.height * 0.5);

  // One transaction's page: its timeline from the coordinator, the hostile id shown as text.
  await hostileRow.locator(".transactional-id a").first().click();
  await page.locator("ol.timeline").waitFor({ timeout: 15_000 });
  await expect(page.locator('[data-field="transactionalId"]').textContent()).resolves.toBe(HOSTILE_ID);
  const steps = await page.locator("ol.timeline li.step").evaluateAll((items) => items.map((item) => item.getAttribute("data-kind")));
  expect(steps).toEqual(["initialized", "began"]);
  await page.locator('#live-status[data-state="live"]').waitFor({ timeout: 15_000 });
  expect(await page.title()).not.toBe("pwned");
  expect(await page.locator("img").count()).toBe(0);
  expect(dialogs).toEqual([]);

  // Nothing but the page, its script, its stylesheet and its event stream was loaded, and nothing complained.
  const origin = new URL(stack.httpUrl).origin;
  const paths = new Set(requested.map((url) => new URL(url).pathname));
  expect([...paths].sort()).toEqual(["/", "/dashboard.css", "/dashboard.js", "/dashboard/events", `/dashboard/transactions/${encodeURIComponent(HOSTILE_ID)}`].sort());
  expect(requested.filter((url) => !url.startsWith(`${origin}/`))).toEqual([]);
  expect(consoleErrors).toEqual([]);
}, 90_000);
