// `bun:test` for syncguard's own tests, run by Node's runner (scripts/syncguard-conformance.js
// copies this file next to the transpiled tests). Only what syncguard's test/contracts,
// test/e2e and test/unit use: describe / it / it.skip / the four hooks onto node:test, an
// `expect` with the matchers those files call, each failing through node:assert, and Jest-style
// `mock(fn)` / `spyOn(object, name)`. Written here from Bun's documented behaviour (default
// per-test timeout 5 s; `it(name, fn, timeout | { timeout })`).
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

/**
 * A mock function (Bun's `mock(impl)`, Jest's `jest.fn`): records `mock.calls` and
 * `mock.results`; answers with the next one-off behaviour queued, else the default one, else
 * `impl`.
 */
export function mock(impl) {
  const once = []
  let fallback
  const fn = function (...args) {
    fn.mock.calls.push(args)
    fn.mock.lastCall = args
    const behaviour = once.shift() ?? fallback ?? impl
    try {
      const value = behaviour ? behaviour.apply(this, args) : undefined
      fn.mock.results.push({ type: 'return', value })
      return value
    } catch (err) {
      fn.mock.results.push({ type: 'throw', value: err })
      throw err
    }
  }
  fn.mock = { calls: [], results: [], lastCall: undefined }
  const chain = (set) => (v) => (set(v), fn)
  fn.mockImplementation = chain((f) => (fallback = f))
  fn.mockImplementationOnce = chain((f) => once.push(f))
  fn.mockReturnValue = chain((v) => (fallback = () => v))
  fn.mockReturnValueOnce = chain((v) => once.push(() => v))
  fn.mockResolvedValue = chain((v) => (fallback = () => Promise.resolve(v)))
  fn.mockResolvedValueOnce = chain((v) => once.push(() => Promise.resolve(v)))
  fn.mockRejectedValue = chain((v) => (fallback = () => Promise.reject(v)))
  fn.mockRejectedValueOnce = chain((v) => once.push(() => Promise.reject(v)))
  fn.mockClear = () => ((fn.mock.calls = []), (fn.mock.results = []), (fn.mock.lastCall = undefined), fn)
  fn.mockReset = () => (fn.mockClear(), (once.length = 0), (fallback = undefined), (impl = undefined), fn)
  fn.mockRestore = () => fn.mockReset()
  fn._isMockFunction = true
  return fn
}

/** Bun's `spyOn(object, name)`: a mock calling the original until told otherwise; restorable. */
export function spyOn(object, name) {
  const original = object[name]
  const spy = mock(function (...args) {
    return original.apply(this, args)
  })
  spy.mockRestore = () => {
    object[name] = original
    return spy
  }
  object[name] = spy
  return spy
}

/** Jest's `toMatchObject`: every property of `expected` present in `actual`, recursively. */
function matchesObject(actual, expected) {
  if (typeof expected !== 'object' || expected === null) return looselyEqual(actual, expected)
  if (typeof actual !== 'object' || actual === null) return false
  if (Array.isArray(expected)) return Array.isArray(actual) && actual.length === expected.length && expected.every((v, i) => matchesObject(actual[i], v))
  return Object.keys(expected).every((k) => k in actual && matchesObject(actual[k], expected[k]))
}

const callsOf = (fn) => {
  if (!fn?._isMockFunction) assert.fail(`expected a mock function, got ${show(fn)}`)
  return fn.mock.calls
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
    toMatchObject: (e) => check(matchesObject(actual, e), `to match object ${show(e)}`),
    toHaveBeenCalled: () => check(callsOf(actual).length > 0, 'to have been called'),
    toHaveBeenCalledTimes: (n) => check(callsOf(actual).length === n, `to have been called ${n} times (called ${actual?.mock?.calls.length})`),
    toHaveBeenCalledWith: (...args) => check(callsOf(actual).some((call) => looselyEqual(call, args)), `to have been called with ${show(args)} (calls ${show(actual?.mock?.calls)})`),
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
  // expect(promise).resolves.<matcher>(...): the matcher on the fulfilled value.
  plain.resolves = new Proxy(
    {},
    {
      get: (_, name) => async (...args) => matchers(await actual, false)[name](...args),
    },
  )
  return plain
}
expect.unreachable = (message) => assert.fail(message ?? 'reached a line the test says is unreachable')
