// graphile-worker at its defaults (issue 24 item 1): N jobs added with addJobs, then a
// runner with `concurrency` and an empty task, timed from its start until every job
// succeeded. Its own schema (the namespace), dropped by the bench before the run.
import { makeWorkerUtils, run } from "graphile-worker";
import { args, counter, ready, released, report } from "./common.js";

const { url, namespace, concurrency, jobs } = args();
const utils = await makeWorkerUtils({ connectionString: url, schema: namespace });
await utils.migrate();
for (let i = 0; i < jobs; i += 1000) {
  const batch = [];
  for (let j = i; j < Math.min(jobs, i + 1000); j++) batch.push({ identifier: "noop", payload: {} });
  await utils.addJobs(batch);
}
await utils.release();
await ready();
const count = counter(jobs);
const started = process.hrtime.bigint();
const runner = await run({
  connectionString: url,
  schema: namespace,
  concurrency,
  noHandleSignals: true,
  taskList: { noop: async () => {} },
});
runner.events.on("job:success", () => count.one());
await count.all;
report(count.done, started);
await released();
await runner.stop();
