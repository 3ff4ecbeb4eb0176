// BullMQ at its defaults (issue 24 item 1): N jobs added in bulk, then one Worker with
// `concurrency` and an empty processor, timed from its start until every job completed.
import { Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import { args, counter, ready, released, report } from "./common.js";

const { url, namespace, concurrency, jobs } = args();
// BullMQ 6 takes a constructed client in ESM; ioredis as its documentation sets it up.
const connection = new Redis(url, { maxRetriesPerRequest: null });
const queue = new Queue("drain", { connection, prefix: namespace });
for (let i = 0; i < jobs; i += 1000) {
  const batch = [];
  for (let j = i; j < Math.min(jobs, i + 1000); j++) batch.push({ name: "noop", data: {} });
  await queue.addBulk(batch);
}
await ready();
const count = counter(jobs);
const worker = new Worker("drain", async () => {}, {
  connection,
  prefix: namespace,
  concurrency,
  autorun: false,
});
worker.on("completed", () => count.one());
const started = process.hrtime.bigint();
worker.run();
await count.all;
report(count.done, started);
await released();
await worker.close();
await queue.close();
await connection.quit();
