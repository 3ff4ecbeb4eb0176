// graphile-worker beside this library. Its own schema (the namespace), dropped by the bench
// before and after the run. Three measurements, chosen by the mode:
//
// Drain: N jobs added with addJobs, then one runner with `concurrency` and an empty task,
// timed from its start until its jobs table is empty (it deletes a job when it records the
// completion; its `job:success` event comes before that write, and with batched completions
// well before). Modes:
// - default: its defaults (no local queue, one completion statement per job);
// - lq32: `localQueue.size` 32 and batched completions (`completeJobBatchDelay: 0`,
//   `failJobBatchDelay: 0`), the batching its performance page documents;
// - lq500: the same with `localQueue.size` 500, the setup of its performance page's figures.
//
// pickup: an idle runner with `concurrency` and its defaults, which are its low-latency
// setting: it LISTENs for the NOTIFY its `add_job` sends and fetches at once (its 2 s
// `pollInterval` is only the fallback). Then N jobs plus 5 warm-up ones, each added alone
// with `addJob` from this process's utils pool (another connection) one every `every` ms on
// a fixed schedule, each carrying its add instant (taken just before `addJob`); the task's
// first statement records now minus that instant. Prints `PICKUP {"ms":[...],"lost":L}`.
//
// bulk: no runner; N jobs added with `addJobs` in batches of 1,000 into the empty schema,
// timed over the whole insert. Prints `BULK {"jobs":N,"secs":S}`.
import { makeWorkerUtils, run } from "graphile-worker";
import { args, bulkEnqueue, counter, pickupSeries, ready, released, report, settled } from "./common.js";

const { url, namespace, concurrency, jobs, mode, budget, every } = args([
  "default",
  "lq32",
  "lq500",
  "pickup",
  "bulk",
]);
const utils = await makeWorkerUtils({ connectionString: url, schema: namespace });
await utils.migrate();
// What every runner of this script shares: the server, the schema, the concurrency.
const runnerOptions = { connectionString: url, schema: namespace, concurrency, noHandleSignals: true };

async function drain() {
  for (let i = 0; i < jobs; i += 1000) {
    const batch = [];
    for (let j = i; j < Math.min(jobs, i + 1000); j++) batch.push({ identifier: "noop", payload: {} });
    await utils.addJobs(batch);
  }
  const table = `"${namespace}"._private_jobs`;
  const remaining = () =>
    utils.withPgClient(async (client) => {
      const { rows } = await client.query(`select count(*)::int as n from ${table}`);
      return rows[0].n;
    });
  await ready();
  const batching = {
    lq32: { localQueue: { size: 32 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 },
    lq500: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 },
  }[mode];
  const count = counter(jobs, budget);
  const started = process.hrtime.bigint();
  const startedMs = Date.now();
  const runner = await run({
    ...runnerOptions,
    taskList: { noop: async () => {} },
    ...(batching ? { preset: { worker: batching } } : {}),
  });
  count.start();
  runner.events.on("job:success", () => count.one());
  await count.all;
  const deadline = budget > 0 ? startedMs + budget * 1000 : Date.now() + 60_000;
  const left = await settled(remaining, deadline);
  report(jobs - left, started, left > 0);
  await released();
  await runner.stop();
}

async function pickup() {
  const series = pickupSeries(jobs);
  const runner = await run({
    ...runnerOptions,
    taskList: { pickup: async (payload) => series.record(payload.i, payload.t) },
  });
  await ready();
  await series.run(every, false, (i, t) => utils.addJob("pickup", { i, t }));
  await released();
  await runner.stop();
}

async function bulk() {
  await ready();
  await bulkEnqueue(jobs, (from, to) => {
    const batch = [];
    for (let j = from; j < to; j++) batch.push({ identifier: "noop", payload: {} });
    return utils.addJobs(batch);
  });
  await released();
}

await ({ pickup, bulk }[mode] ?? drain)();
await utils.release();
