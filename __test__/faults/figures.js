'use strict'

// Fault tests record what they measured here; scripts/faults-report.js writes the README's
// fault section from it, so the published figures are the suite's own.
const fs = require('node:fs')
const path = require('node:path')

const FILE = path.join(__dirname, 'results.json')

/** Records `figures` (a flat object of numbers or short strings) under `scenario`. */
function record(scenario, title, figures) {
  let all = {}
  try {
    all = JSON.parse(fs.readFileSync(FILE, 'utf8'))
  } catch {}
  all[scenario] = { title, figures, at: new Date().toISOString() }
  fs.writeFileSync(FILE, `${JSON.stringify(all, null, 2)}\n`)
}

module.exports = { record, FILE }
