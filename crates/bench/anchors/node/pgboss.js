// pg-boss 10 beside this library. Its own schema (the namespace), dropped by the bench before
// and after the run; its queue made with `createQueue`, as 10.x requires. Three
// measurements, chosen by the mode:
//
// Drain: N jobs added with `insert` in batches of 1,000, then `concurrency` workers (`work`
// called C times: each call is one polling loop) with an empty handler, timed from the first
// `work` call until its job table counts every job `completed`. pg-boss records a batch's
// completion after the handler returned without waiting for it, so the handler's count is
// not the end. Modes:
// - default: its defaults (each worker fetches 1 job, then waits out its 2 s polling
//   interval before the next fetch, whether or not it found work);
// - batch: `batchSize: 500` and the shortest polling interval it accepts
//   (`pollingIntervalSeconds: 0.5`), its documented way to raise throughput.
//
// pickup: `concurrency` idle workers (`work` called C times) with a handler that records
// each job of its batch, then N jobs plus 5 warm-up ones, each added alone with `send`
// carrying its add instant (taken just before `send`); the handler's first statement records
// now minus that instant. pg-boss has no wake-up across connections: its workers poll, so a
// job waits for the next fetch. The adds come after random gaps of 0.5-1.5x `every` ms (the
// bench passes a quarter of the polling interval), so they fall at every phase of the
// polling loops and never outrun them. Modes:
// - pickup: its defaults (polling every 2 s);
// - pickup-fast: `pollingIntervalSeconds: 0.5`, the shortest it accepts (its documented
//   low-latency setting). Its `notifyWorker(id)` skips a worker's wait, but only from the
//   worker's own process, so a producer elsewhere cannot use it; it is not used here.
// Prints `PICKUP {"ms":[...],"lost":L}`.
//
// bulk: no worker; N jobs added with `insert` in batches of 1,000 into the empty queue,
// timed over the whole insert. Prints `BULK {"jobs":N,"secs":S}`.
import PgBoss from "pg-boss";
import { args, bulkEnqueue, counter, pickupSeries, ready, released, report, settled } from "./common.js";

const { url, namespace, concurrency, jobs, mode, budget, every } = args([
  "default",
  "batch",
  "pickup",
  "pickup-fast",
  "bulk",
]);
const boss = new PgBoss({ connectionString: url, schema: namespace });
boss.on("error", (e) => console.error(`pg-boss: ${e.message}`));
await boss.start();
const name = mode.startsWith("pickup") || mode === "bulk" ? mode : "drain";
await boss.createQueue(name);

async function drain() {
  for (let i = 0; i < jobs; i += 1000) {
    const batch = [];
    for (let j = i; j < Math.min(jobs, i + 1000); j++) batch.push({ name, data: {} });
    await boss.insert(batch);
  }
  const db = boss.getDb();
  const completed = async () => {
    const { rows } = await db.executeSql(
      `select count(*)::int as n from "${namespace}".job where name = $1 and state = 'completed'`,
      [name],
    );
    return rows[0].n;
  };
  await ready();
  const options = mode === "batch" ? { batchSize: 500, pollingIntervalSeconds: 0.5 } : {};
  const count = counter(jobs, budget);
  const started = process.hrtime.bigint();
  const startedMs = Date.now();
  count.start();
  for (let w = 0; w < concurrency; w++) {
    await boss.work(name, options, async (batch) => {
      for (let k = 0; k < batch.length; k++) count.one();
    });
  }
  await count.all;
  const deadline = budget > 0 ? startedMs + budget * 1000 : Date.now() + 60_000;
  const left = await settled(async () => jobs - (await completed()), deadline);
  report(jobs - left, started, left > 0);
  await released();
}

async function pickup() {
  const series = pickupSeries(jobs);
  const options = mode === "pickup-fast" ? { pollingIntervalSeconds: 0.5 } : {};
  for (let w = 0; w < concurrency; w++) {
    await boss.work(name, options, async (batch) => {
      for (const job of batch) series.record(job.data.i, job.data.t);
    });
  }
  await ready();
  await series.run(every, true, (i, t) => boss.send(name, { i, t }));
  await released();
}

async function bulk() {
  await ready();
  await bulkEnqueue(jobs, (from, to) => {
    const batch = [];
    for (let j = from; j < to; j++) batch.push({ name, data: {} });
    return boss.insert(batch);
  });
  await released();
}

await ({ pickup, "pickup-fast": pickup, bulk }[mode] ?? drain)();
// Its stop waited past the bench's 60 s exit deadline once (batch mode, C = 64): give it 5 s.
await Promise.race([boss.stop({ graceful: false, wait: true }), new Promise((r) => setTimeout(r, 5000))]);
process.exit(0);
