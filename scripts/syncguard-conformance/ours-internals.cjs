'use strict'

// For `--suite unit --target ours`: syncguard's unit tests import its internal modules
// (common/crypto.js, common/disposable.js, ...). Ours has the same functions under other file
// names (lib/syncguard/*.js) and exports the public ones from the entry: this merges them into
// one object that the generated stand-ins for syncguard's modules read name by name. A name
// ours lacks reads undefined (the harness lists those). The repository: SG_CONF_ROOT, else this one.
const fs = require('node:fs')
const path = require('node:path')

const root = process.env.SG_CONF_ROOT ?? path.resolve(__dirname, '..', '..')
const all = {}
const dir = path.join(root, 'lib', 'syncguard')
for (const file of fs.existsSync(dir) ? fs.readdirSync(dir).sort() : []) {
  if (file.endsWith('.js')) Object.assign(all, require(path.join(dir, file)))
}
const entry = path.join(root, 'syncguard.js')
if (fs.existsSync(entry)) Object.assign(all, require(entry))
module.exports = all
