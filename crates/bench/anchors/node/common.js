// Shared by the anchors' runners: arguments, the handshake with the
// bench on stdin, the result lines, a counter that resolves when every job is done, and the
// pickup series and bulk-enqueue timing of the pickup and bulk modes.
import { createInterface } from "node:readline";
import { performance } from "node:perf_hooks";

// The bench writes a line when its counters are read ("go"), and closes stdin once it has
// read them again after the result line.
const input = createInterface({ input: process.stdin });
const firstLine = new Promise((resolve) => {
  input.once("line", resolve);
  input.once("close", resolve);
});
const closed = new Promise((resolve) => input.once("close", resolve));

// Prints READY (every job enqueued) and waits for the bench's go.
export async function ready() {
  console.log("READY");
  await firstLine;
}

// Resolves when the bench closes stdin.
export function released() {
  return closed;
}
// `<url> <namespace> <concurrency> <jobs> [mode] [budget secs] [every ms]`: the mode names
// the configuration (each runner's own list; "default" when left out), the budget the longest
// a drain may run before the runner reports what it completed by then (none when left out),
// `every` the mean gap between two adds of a pickup series (20 when left out).
export function args(modes) {
  const [url, namespace, c, n, mode = "default", b = "0", e = "20"] = process.argv.slice(2);
  const concurrency = Number(c);
  const jobs = Number(n);
  const budget = Number(b);
  const every = Number(e);
  if (
    !url || !namespace || !(concurrency > 0) || !(jobs > 0) || !(budget >= 0) || !(every > 0) ||
    !modes.includes(mode)
  ) {
    console.error(`usage: <url> <namespace> <concurrency> <jobs> [${modes.join("|")}] [budget secs] [every ms]`);
    process.exit(2);
  }
  return { url, namespace, concurrency, jobs, mode, budget, every };
}

// Resolves `all` when `jobs` were counted, or when `budget` seconds passed since `start()`
// (0: no budget); `partial` says which.
export function counter(jobs, budget = 0) {
  let done = 0;
  let partial = false;
  let finish;
  const all = new Promise((resolve) => (finish = resolve));
  return {
    all,
    start() {
      if (budget > 0) {
        setTimeout(() => {
          partial = done < jobs;
          finish();
        }, budget * 1000).unref();
      }
    },
    one() {
      done += 1;
      if (done === jobs) finish();
    },
    get done() {
      return done;
    },
    get partial() {
      return partial;
    },
  };
}

// Polls `remaining()` (jobs not yet recorded complete in the queue's own tables) every 2 ms
// until it is 0 or the deadline (ms since the epoch) passed; resolves to what is left.
export async function settled(remaining, deadlineMs) {
  for (;;) {
    const left = await remaining();
    if (left === 0 || Date.now() >= deadlineMs) return left;
    await new Promise((r) => setTimeout(r, 2));
  }
}

export function report(jobs, startedNs, partial = false) {
  const secs = Number(process.hrtime.bigint() - startedNs) / 1e9;
  console.log(`ANCHOR ${JSON.stringify({ jobs, secs, partial })}`);
}

// Wall-clock milliseconds with sub-millisecond resolution: what a pickup job carries as its
// add instant and what its handler subtracts it from (one process, one clock).
export function now() {
  return performance.timeOrigin + performance.now();
}

const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

// Adds left out at the start of a pickup series (connections warming up), as the bench's own
// pickup row leaves out its first 5.
export const WARMUP = 5;
// The longest wait for the last pickup of a series after its last add.
const PICKUP_DEADLINE_MS = 30_000;

// A pickup series of `jobs` measured adds after WARMUP more: `record(i, t)` is what a
// handler calls first with its job's index and add instant; `run(every, jitter, add)` adds
// them, `add(i, t)` with `t = now()` taken just before the add call, one every `every` ms on
// a fixed schedule, or (jitter) after a random gap of 0.5-1.5x `every`, so the adds fall at
// every phase of a polling worker's loop; then waits for every pickup (30 s at most) and
// prints `PICKUP {"ms":[...],"lost":L}`: the latencies of the measured adds in add order,
// and how many adds (warm-up included) were never picked up.
export function pickupSeries(jobs) {
  const total = jobs + WARMUP;
  const ms = new Array(total).fill(null);
  let seen = 0;
  let finish;
  const all = new Promise((resolve) => (finish = resolve));
  return {
    record(i, t) {
      const latency = now() - t;
      if (Number.isInteger(i) && i >= 0 && i < total && ms[i] === null) {
        ms[i] = latency;
        seen += 1;
        if (seen === total) finish();
      }
    },
    async run(every, jitter, add) {
      let next = now();
      for (let i = 0; i < total; i++) {
        next += jitter ? every * (0.5 + Math.random()) : every;
        await sleep(next - now());
        await add(i, now());
      }
      await Promise.race([all, sleep(PICKUP_DEADLINE_MS)]);
      const lost = ms.filter((x) => x === null).length;
      const measured = ms.slice(WARMUP).filter((x) => x !== null);
      console.log(`PICKUP ${JSON.stringify({ ms: measured, lost })}`);
    },
  };
}

// Adds `jobs` in batches of 1,000 through `addBatch(from, to)` and prints
// `BULK {"jobs":N,"secs":S}`, S from the first batch's call to the last one's return.
export async function bulkEnqueue(jobs, addBatch) {
  const started = process.hrtime.bigint();
  for (let i = 0; i < jobs; i += 1000) await addBatch(i, Math.min(jobs, i + 1000));
  const secs = Number(process.hrtime.bigint() - started) / 1e9;
  console.log(`BULK ${JSON.stringify({ jobs, secs })}`);
}
