'use strict'

// syncguard's lock(fn) form: the function runs while the lock is held and the lock is released
// when it settles, whatever it returns or throws. Two callers that want one key run one after
// the other, so an unprotected read-modify-write stays exact.
//
//   node examples/syncguard-lock.js
//   REDIS_URL=redis://127.0.0.1:6379 node examples/syncguard-lock.js
const { createRedisBackend, lock } = require('native-redis-lock/syncguard')

const url = process.env.REDIS_URL || 'memory://examples'
const backend = createRedisBackend(url)
let balance = 100 // stands for a row both callers update

async function charge(amount) {
  return lock(backend, async () => {
    const read = balance
    await new Promise((resolve) => setTimeout(resolve, 30)) // another caller would interleave here
    balance = read - amount
    return balance
  }, { key: `wallet:${process.pid}`, ttlMs: 5000, acquisition: { timeoutMs: 2000 } })
}

async function main() {
  console.log(`backend: ${url.startsWith('memory://') ? url : 'REDIS_URL'}`)
  const results = await Promise.all([charge(30), charge(20)])
  console.log(`each charge saw the other's result: ${results.sort((x, y) => y - x).join(', ')}`)
  console.log(`balance: ${balance}`)
  try {
    await lock(backend, async () => {
      throw new Error('payment gateway down')
    }, { key: `wallet:${process.pid}` })
  } catch (err) {
    console.log(`a failed charge threw "${err.message}"`)
  }
  const free = !(await backend.isLocked({ key: `wallet:${process.pid}` }))
  console.log(`the lock was released after it: ${free}`)
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
