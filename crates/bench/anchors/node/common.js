// Shared by the anchors' runners (issue 24 item 1): arguments, the result line, a counter
// that resolves when every job is done.
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
