'use strict'

// Preloaded (`node -r`) into a bench script by bench-smoke.test.js: makes the peers in
// bench/node_modules unresolvable, as on a fresh checkout where only the root's `npm install`
// ran (CI), so that a bench script which loads a peer it does not use fails here too, and not
// only in CI.
const Module = require('node:module')
const path = require('node:path')

const root = path.join(__dirname, '..', '..')
const peers = path.join(root, 'bench', 'node_modules') + path.sep
const resolve = Module._resolveFilename
Module._resolveFilename = function (request, ...rest) {
  const found = resolve.call(this, request, ...rest)
  if (!found.startsWith(peers)) return found
  // What the root's `npm install` provides (ioredis, say) is found there, as in CI.
  try {
    return require.resolve(request, { paths: [root] })
  } catch {
    const err = new Error(`Cannot find module '${request}' (bench/node_modules is hidden by without-bench-peers.js)`)
    err.code = 'MODULE_NOT_FOUND'
    throw err
  }
}
