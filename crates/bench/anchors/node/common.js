// Shared by the anchors' runners (issue 24 item 1): arguments, the handshake with the
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
export function args() {
  const [url, namespace, c, n] = process.argv.slice(2);
  const concurrency = Number(c);
  const jobs = Number(n);
  if (!url || !namespace || !(concurrency > 0) || !(jobs > 0)) {
    console.error("usage: <url> <namespace> <concurrency> <jobs>");
    process.exit(2);
  }
  return { url, namespace, concurrency, jobs };
}

export function counter(jobs) {
  let done = 0;
  let finish;
  const all = new Promise((resolve) => (finish = resolve));
  return {
    all,
    one() {
      done += 1;
      if (done === jobs) finish();
    },
    get done() {
      return done;
    },
  };
}

export function report(jobs, startedNs) {
  const secs = Number(process.hrtime.bigint() - startedNs) / 1e9;
  console.log(`ANCHOR ${JSON.stringify({ jobs, secs })}`);
}
