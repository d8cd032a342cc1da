'use strict'

const assert = require('node:assert/strict')

/** Runs `fn`, expecting it to throw synchronously an EINVAL naming `argument`; returns the error. */
function refused(fn, argument) {
  let caught
  try {
    fn()
  } catch (err) {
    caught = err
  }
  assert.ok(caught, `nothing was refused (expected ${argument})`)
  assert.equal(caught.code, 'EINVAL', caught.stack)
  assert.equal(caught.argument, argument, caught.message)
  return caught
}

module.exports = { refused }
