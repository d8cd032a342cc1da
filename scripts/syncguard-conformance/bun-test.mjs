// `bun:test` for syncguard's own tests, run by Node's runner (scripts/syncguard-conformance.js
// copies this file next to the transpiled tests). Only what syncguard's test/contracts and
// test/e2e use: describe / it / it.skip / the four hooks onto node:test, and an `expect` with
// the matchers those files call, each failing through node:assert. Written here from Bun's
// documented behaviour (default per-test timeout 5 s; `it(name, fn, timeout | { timeout })`).
import assert from 'node:assert/strict'
import * as nodeTest from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'

// Bun's global, as the tests use it: Bun.sleep(ms) resolves after ms.
globalThis.Bun ??= { sleep: (ms) => sleep(ms) }

const BUN_DEFAULT_TIMEOUT_MS = 5000

/** node:test options from Bun's third argument (a number, or { timeout, retry }: retry ignored). */
function optionsOf(extra) {
  const timeout = typeof extra === 'number' ? extra : extra?.timeout
  return { timeout: timeout ?? BUN_DEFAULT_TIMEOUT_MS }
}

// The wrapper takes no argument: node:test would read a second parameter as a `done` callback.
export function it(name, fn, extra) {
  return nodeTest.it(name, optionsOf(extra), () => fn())
}
it.skip = (name, fn, extra) => nodeTest.it.skip(name, optionsOf(extra), () => fn?.())
it.only = it
export const test = it

export function describe(name, body) {
  return nodeTest.describe(name, () => body())
}
describe.skip = (name, body) => nodeTest.describe.skip(name, () => body())

export const beforeAll = (fn) => nodeTest.before(() => fn())
export const afterAll = (fn) => nodeTest.after(() => fn())
export const beforeEach = (fn) => nodeTest.beforeEach(() => fn())
export const afterEach = (fn) => nodeTest.afterEach(() => fn())

/** Jest's `toEqual`: deep, properties holding `undefined` ignored, prototypes not compared. */
function looselyEqual(a, b) {
  if (Object.is(a, b)) return true
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  if (Array.isArray(a)) return a.length === b.length && a.every((v, i) => looselyEqual(v, b[i]))
  const keys = (o) => Object.keys(o).filter((k) => o[k] !== undefined)
  const ka = keys(a)
  const kb = keys(b)
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && looselyEqual(a[k], b[k]))
}

/** Whether `err` satisfies `toThrow(expected)`: a class, a substring, a RegExp, or anything. */
function throwMatches(err, expected) {
  if (expected === undefined) return true
  if (typeof expected === 'function') return err instanceof expected
  const message = err?.message ?? String(err)
  if (expected instanceof RegExp) return expected.test(message)
  if (typeof expected === 'string') return message.includes(expected)
  return message === expected?.message
}

const show = (v) => {
  try {
    return typeof v === 'string' ? JSON.stringify(v) : (JSON.stringify(v) ?? String(v))
  } catch {
    return String(v)
  }
}

/** The plain matchers; `negate` flips each check. */
function matchers(actual, negate) {
  const check = (ok, what) => {
    if (ok === negate) assert.fail(`expected ${show(actual)} ${negate ? 'not ' : ''}${what}`)
  }
  return {
    toBe: (e) => check(Object.is(actual, e), `to be ${show(e)}`),
    toEqual: (e) => check(looselyEqual(actual, e), `to equal ${show(e)}`),
    toBeNull: () => check(actual === null, 'to be null'),
    toBeUndefined: () => check(actual === undefined, 'to be undefined'),
    toBeDefined: () => check(actual !== undefined, 'to be defined'),
    toBeTruthy: () => check(!!actual, 'to be truthy'),
    toBeFalsy: () => check(!actual, 'to be falsy'),
    toBeGreaterThan: (e) => check(actual > e, `to be > ${show(e)}`),
    toBeGreaterThanOrEqual: (e) => check(actual >= e, `to be >= ${show(e)}`),
    toBeLessThan: (e) => check(actual < e, `to be < ${show(e)}`),
    toBeLessThanOrEqual: (e) => check(actual <= e, `to be <= ${show(e)}`),
    toBeInstanceOf: (e) => check(actual instanceof e, `to be an instance of ${e?.name}`),
    toMatch: (e) => check(typeof actual === 'string' && (e instanceof RegExp ? e.test(actual) : actual.includes(e)), `to match ${e}`),
    toContain: (e) => check(actual?.includes?.(e) === true, `to contain ${show(e)}`),
    toHaveLength: (e) => check(actual?.length === e, `to have length ${e}`),
    toThrow: (e) => {
      let threw = false
      let err
      try {
        actual()
      } catch (caught) {
        threw = true
        err = caught
      }
      check(threw && throwMatches(err, e), `to throw ${e?.name ?? show(e)}${threw ? ` (threw ${show(err?.message)})` : ''}`)
    },
  }
}

export function expect(actual) {
  const plain = matchers(actual, false)
  plain.not = matchers(actual, true)
  plain.rejects = {
    async toThrow(e) {
      let err
      let threw = false
      try {
        await actual
      } catch (caught) {
        threw = true
        err = caught
      }
      if (!threw) assert.fail(`expected a rejection matching ${e?.name ?? show(e)}, got a fulfilment`)
      if (!throwMatches(err, e)) assert.fail(`expected a rejection matching ${e?.name ?? show(e)}, got ${err?.name}: ${err?.message}`)
    },
  }
  plain.resolves = {
    toBe: async (e) => matchers(await actual, false).toBe(e),
    toEqual: async (e) => matchers(await actual, false).toEqual(e),
  }
  return plain
}
