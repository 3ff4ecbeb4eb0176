// Shared by the anchors' runners: arguments, the handshake with the
// bench on stdin, the result line, a counter that resolves when every job is done.
import { createInterface } from "node:readline";

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
// `<url> <namespace> <concurrency> <jobs> [mode] [budget secs]`: the mode names the
// configuration (each runner's own list; "default" when left out), the budget the longest a
// drain may run before the runner reports what it completed by then (none when left out).
export function args(modes) {
  const [url, namespace, c, n, mode = "default", b = "0"] = process.argv.slice(2);
  const concurrency = Number(c);
  const jobs = Number(n);
  const budget = Number(b);
  if (!url || !namespace || !(concurrency > 0) || !(jobs > 0) || !(budget >= 0) || !modes.includes(mode)) {
    console.error(`usage: <url> <namespace> <concurrency> <jobs> [${modes.join("|")}] [budget secs]`);
    process.exit(2);
  }
  return { url, namespace, concurrency, jobs, mode, budget };
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
