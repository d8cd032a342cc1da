'use strict'

// node bench/callgrind-pairs.js <serial|inflight> <pairs>
//
// DistributedLock acquire + release pairs on memory://, as (a) (one loop, one key) or (b)
// (256 loops, each on its own key), with the bench adapter's options: a driver for counting
// instructions, which hold on a loaded machine where times do not. Run it under callgrind
// at two counts of pairs; the difference of the totals over the difference of the counts
// is the instructions of one pair, start-up and warm-up cancelled out:
//
//   for n in 2000 12000; do
//     valgrind --tool=callgrind --callgrind-out-file=cg.$n.out node bench/callgrind-pairs.js inflight $n
//   done   # (total at 12000 - total at 2000) / 10000, from "Collected" on stderr
//
// ROOT=<a built copy of the package> counts another build the same way.
const { memoryLock, runPairs } = require('./lib/memory-pairs')

const [mode, count] = process.argv.slice(2)
const pairs = Number(count)
if (!['serial', 'inflight'].includes(mode) || !(pairs > 0)) {
  console.error('usage: node bench/callgrind-pairs.js <serial|inflight> <pairs>')
  process.exit(2)
}

runPairs(memoryLock('bench'), mode === 'serial' ? 1 : 256, pairs).then(
  () => process.exit(0),
  (err) => {
    console.error(err)
    process.exit(1)
  },
)
