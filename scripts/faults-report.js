'use strict'

// Writes docs/FAULTS.md's table from the figures the last `npm run test:faults`
// recorded (__test__/faults/results.json), between the faults:begin/end markers.
const fs = require('node:fs')
const path = require('node:path')
const { FILE } = require('../__test__/faults/figures')

const REPORT = path.join(__dirname, '..', 'docs', 'FAULTS.md')
const BEGIN = '<!-- faults:begin (written by scripts/faults-report.js) -->'
const END = '<!-- faults:end -->'

// What each scenario proves, in the order the report lists them.
const SCENARIOS = [
  ['contention', '4 OS processes x 10 s of non-atomic GET/SET increments under the lock: no lost update.'],
  ['paused-holder', 'A holder SIGSTOPped for 2 x TTL, then writing: fencing rejects every stale write, `isHeld` is false after the local deadline, the holder is told on resuming.'],
  ['restart', 'Redis restarted empty mid-hold: the holder is told as soon as Redis accepts connections, and the same client works again.'],
  ['partition', 'A black-holing proxy for 2 x TTL: the holder is told at its local deadline, before a contender can acquire; every call settles within its bound; work resumes after the heal.'],
  ['slow-redis', '50 ms added each way: no false loss and no gap in the lock at TTL 1000 and 300.'],
  ['blocked-loop', 'A blocked JS event loop: the native refresh keeps the lock through 2 x TTL; past the stall budget it is given up and the holder told on unblocking.'],
  ['hostile-input', 'Hostile input: rejected before any Redis call, or locked byte-exact; no crash, hang or coercion.'],
  ['sentinel-failover', 'Sentinel: a lock whose key the promoted replica lacks is told ELOST to every API (kill_told_ms from the master\'s SIGKILL); new acquisitions reach the new master after a kill and after `SENTINEL FAILOVER` (reached_ms from the promotion); a waiter from before the failover is woken by a release after it (woken_ms).'],
  ['redlock-fast', 'Redlock on the JS-thread quorum path, 5 nodes: one SIGSTOPped (200 serial pairs, each within the command timeout; the socket back after SIGCONT), one SIGKILLed with 256 pairs in flight (all settle, exact counter, no key left), 3 delayed past a 40 ms TTL (ETIMEDOUT, all freed), 2 restarted empty (no second holder), a worker terminated mid acquire (freed), unequal fence counters (written back).'],
  ['soak', 'Soak: RSS and handle count flat after warm-up; the process exits promptly.'],
  ['soak-mixed', 'Every API on Redis and memory://, 4 processes, the lock server SIGKILLed and restarted every 20 s, a child SIGKILLed and respawned: no RSS growth past 5 % after warm-up, no leaked resource, no op past its bound, no unhandled rejection, no two holders at once (every lock on `restartQuarantineMs` 2000, so across the restarts too; `npm run soak` for longer runs).'],
]

function main() {
  const results = JSON.parse(fs.readFileSync(FILE, 'utf8'))
  const lines = [BEGIN, '', '| scenario | what it proves | latest figures |', '|---|---|---|']
  for (const [id, proves] of SCENARIOS) {
    const result = results[id]
    const figures = result
      ? Object.entries(result.figures)
          .map(([name, value]) => `${name} ${value}`)
          .join(', ')
      : 'not run'
    lines.push(`| ${result?.title ?? id} | ${proves} | ${figures} |`)
  }
  const dates = Object.values(results).map((r) => r.at).sort()
  lines.push('', `Figures from the run of ${dates.at(-1)?.slice(0, 16).replace('T', ' ') ?? 'never'} UTC on a 2-core VM (\`npm run test:faults\`).`, '', END)
  const report = fs.readFileSync(REPORT, 'utf8')
  const start = report.indexOf(BEGIN)
  const stop = report.indexOf(END)
  if (start < 0 || stop < 0) throw new Error('docs/FAULTS.md has no faults markers')
  fs.writeFileSync(REPORT, report.slice(0, start) + lines.join('\n') + report.slice(stop + END.length))
  console.log(`docs/FAULTS.md fault figures updated (${Object.keys(results).length} scenarios)`)
}

main()
