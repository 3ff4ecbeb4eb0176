// pg-boss 10 beside this library: N jobs added with `insert` in batches of 1,000 (into a
// queue made with `createQueue`, as 10.x requires), then `concurrency` workers (`work` called
// C times: each call is one polling loop) with an empty handler, timed from the first
// `work` call until its job table counts every job `completed`. pg-boss records a batch's
// completion after the handler returned without waiting for it, so the handler's count is
// not the end. Its own schema (the namespace). Modes:
// - default: its defaults (each worker fetches 1 job, then waits out its 2 s polling
//   interval before the next fetch, whether or not it found work);
// - batch: `batchSize: 500` and the shortest polling interval it accepts
//   (`pollingIntervalSeconds: 0.5`), its documented way to raise throughput.
import PgBoss from "pg-boss";
import { args, counter, ready, released, report, settled } from "./common.js";

const { url, namespace, concurrency, jobs, mode, budget } = args(["default", "batch"]);
const boss = new PgBoss({ connectionString: url, schema: namespace });
boss.on("error", (e) => console.error(`pg-boss: ${e.message}`));
await boss.start();
const name = "drain";
await boss.createQueue(name);
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
// Its stop waited past the bench's 60 s exit deadline once (batch mode, C = 64): give it 5 s.
await Promise.race([boss.stop({ graceful: false, wait: true }), new Promise((r) => setTimeout(r, 5000))]);
process.exit(0);
