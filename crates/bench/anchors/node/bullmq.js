// BullMQ beside this library: N jobs added in bulk, then one Worker with `concurrency` and
// an empty processor, timed from its start until every job completed (its `completed` event
// follows the script that moved the job to the completed set). Modes:
// - default: its defaults;
// - tuned: completed jobs removed at once (`removeOnComplete: { count: 0 }`), the setting
//   its documentation gives for memory and speed of the finished sets.
import { Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import { args, counter, ready, released, report } from "./common.js";

const { url, namespace, concurrency, jobs, mode, budget } = args(["default", "tuned"]);
// BullMQ 6 takes a constructed client in ESM; ioredis as its documentation sets it up.
const connection = new Redis(url, { maxRetriesPerRequest: null });
const queue = new Queue("drain", { connection, prefix: namespace });
for (let i = 0; i < jobs; i += 1000) {
  const batch = [];
  for (let j = i; j < Math.min(jobs, i + 1000); j++) batch.push({ name: "noop", data: {} });
  await queue.addBulk(batch);
}
await ready();
const count = counter(jobs, budget);
const worker = new Worker("drain", async () => {}, {
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
await queue.close();
await connection.quit();
