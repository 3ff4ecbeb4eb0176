// BullMQ beside this library. Its keys under the namespace as prefix, wiped by the bench
// before and after the run. Three measurements, chosen by the mode:
//
// Drain: N jobs added in bulk, then one Worker with `concurrency` and an empty processor,
// timed from its start until every job completed (its `completed` event follows the script
// that moved the job to the completed set). Modes:
// - default: its defaults;
// - tuned: completed jobs removed at once (`removeOnComplete: { count: 0 }`), the setting
//   its documentation gives for memory and speed of the finished sets.
//
// pickup: an idle Worker with `concurrency` and its defaults, which are its low-latency
// setting: it blocks on the queue's marker key (`BZPOPMIN` on its own connection, up to its
// `drainDelay` of 5 s, then blocks again) and an add pushes the marker, so it moves the job
// to active at once. Then N jobs plus 5 warm-up ones, each added alone with `Queue.add` (the
// queue's own connection) one every `every` ms on a fixed schedule, each carrying its add
// instant (taken just before `add`); the processor's first statement records now minus that
// instant. Prints `PICKUP {"ms":[...],"lost":L}`.
//
// bulk: no worker; N jobs added with `addBulk` in batches of 1,000 into the empty queue,
// timed over the whole insert. Prints `BULK {"jobs":N,"secs":S}`.
import { Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import { args, bulkEnqueue, counter, pickupSeries, ready, released, report } from "./common.js";

const { url, namespace, concurrency, jobs, mode, budget, every } = args(["default", "tuned", "pickup", "bulk"]);
// BullMQ 6 takes a constructed client in ESM; ioredis as its documentation sets it up.
const connection = new Redis(url, { maxRetriesPerRequest: null });
const name = mode === "pickup" || mode === "bulk" ? mode : "drain";
const queue = new Queue(name, { connection, prefix: namespace });
await queue.waitUntilReady();

async function drain() {
  for (let i = 0; i < jobs; i += 1000) {
    const batch = [];
    for (let j = i; j < Math.min(jobs, i + 1000); j++) batch.push({ name: "noop", data: {} });
    await queue.addBulk(batch);
  }
  await ready();
  const count = counter(jobs, budget);
  const worker = new Worker(name, async () => {}, {
    connection,
    prefix: namespace,
    concurrency,
    autorun: false,
    ...(mode === "tuned" ? { removeOnComplete: { count: 0 } } : {}),
  });
  worker.on("completed", () => count.one());
  const started = process.hrtime.bigint();
  count.start();
  worker.run();
  await count.all;
  report(count.done, started, count.partial);
  await released();
  await worker.close();
}

async function pickup() {
  const series = pickupSeries(jobs);
  const worker = new Worker(name, async (job) => series.record(job.data.i, job.data.t), {
    connection,
    prefix: namespace,
    concurrency,
  });
  await worker.waitUntilReady();
  await ready();
  await series.run(every, false, (i, t) => queue.add("pickup", { i, t }));
  await released();
  await worker.close();
}

async function bulk() {
  await ready();
  await bulkEnqueue(jobs, (from, to) => {
    const batch = [];
    for (let j = from; j < to; j++) batch.push({ name: "noop", data: {} });
    return queue.addBulk(batch);
  });
  await released();
}

await ({ pickup, bulk }[mode] ?? drain)();
await queue.close();
await connection.quit();
