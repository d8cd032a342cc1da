'use strict'

// Which run measured each row of results.json. `--merge --adapters=...` re-measures some rows
// of a scenario and keeps the others from an earlier run: a ratio of two rows of different runs
// compares two machines' moods, not two libraries (a waitForLock row of a full run against an
// acquire row re-measured on a quieter machine the next day once read 0.56x, where the same
// run read 0.93x). The report shows such a ratio but decides no target on it.

/** Stamps every row of `placements` (placement -> scenario -> adapter id -> row) with `run`. */
function stamp(placements, run) {
  for (const data of Object.values(placements)) {
    for (const result of Object.values(data ?? {})) {
      for (const row of Object.values(result ?? {})) {
        if (row !== null && typeof row === 'object' && Array.isArray(row.rounds)) row.run = run
      }
    }
  }
}

/**
 * The run that measured `id`'s row of `scenario` in `placement`: its stamp, or for a row from
 * before stamps, the last re-measure (meta.remeasured) that names it, else the first run.
 */
function runOf(results, placement, scenario, id) {
  const row = results.placements[placement]?.[scenario]?.[id]
  if (typeof row?.run === 'string') return row.run
  const { meta } = results
  const covers = (m) => m.scenarios.includes(scenario) && m.placements.includes(placement) && (!m.adapters || m.adapters.includes(id))
  return [...(meta.remeasured ?? [])].reverse().find(covers)?.date ?? meta.date
}

/** Whether the rows of `a` and `b` of one scenario and placement come from the same run. */
function sameRun(results, placement, scenario, a, b) {
  return runOf(results, placement, scenario, a) === runOf(results, placement, scenario, b)
}

module.exports = { stamp, runOf, sameRun }
