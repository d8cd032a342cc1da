'use strict'

// The layers (ARCHITECTURE.md) hold: no JavaScript in src/core, no import cycle in the core
// or the binding, no layer importing one above it, the binding's JS-thread runtime (js/) in
// its order, and the binding reaching the core only through front, basics and api; and no two
// types in src/ share a name. The checkers must catch each, so they are also run on copies of
// src/ with one violation planted.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { check } = require('../scripts/check-layers')
const names = require('../scripts/check-names')
const architecture = require('../scripts/check-architecture')

const root = path.join(__dirname, '..')

test('src/core and src/binding keep their layers and have no import cycle', () => {
  const { problems } = check(root)
  assert.deepEqual(problems, [])
})

/**
 * The problems `checker` finds in a copy of src/ with `line` appended to each file of
 * `plants`.
 */
function planted(plants, checker = (copy) => check(copy).problems) {
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'layers-'))
  try {
    fs.cpSync(path.join(root, 'src'), path.join(copy, 'src'), { recursive: true })
    for (const [file, line] of Object.entries(plants)) {
      fs.appendFileSync(path.join(copy, 'src', file), `\n${line}\n`)
    }
    return checker(copy)
  } finally {
    fs.rmSync(copy, { recursive: true, force: true })
  }
}

test("the check fails when a Rust integration test reaches the core's inside", () => {
  const problems = planted({}, (copy) => {
    fs.mkdirSync(path.join(copy, 'tests'))
    fs.writeFileSync(path.join(copy, 'tests', 'inside.rs'), 'use native_redis_lock::core::api::Locker;\nuse native_redis_lock::core::ops::acquire::Plan;\n')
    return check(copy).problems
  })
  assert.deepEqual(problems, ['tests/inside.rs reaches core::ops (only api, basics)'])
})

test('the check fails when a class of the binding reaches past the fronts', () => {
  const problems = planted({ 'binding/lock_service.rs': 'use crate::core::ops::lock::Locker;' })
  assert.deepEqual(problems, ['src/binding/lock_service.rs reaches core::ops (only front, basics, api)'])
})

test('the check fails when any file of the binding reaches past the fronts and api', () => {
  const problems = planted({ 'binding/js/socket/call.rs': 'use crate::core::wait::wake::Caller;' })
  assert.deepEqual(problems, ['src/binding/js/socket/call.rs reaches core::wait (only front, basics, api)'])
})

test('the check fails on an import cycle in the binding', () => {
  const problems = planted({ 'binding/options.rs': 'use super::connection::NativeConnection;' })
  assert.deepEqual(problems, ['binding import cycle: connection -> options -> connection'])
})

test('the check fails when a file of js/ uses one later in its order', () => {
  // No cycle: teardown does not use the responder. Only the order forbids it.
  const problems = planted({ 'binding/js/responder.rs': 'use super::teardown::end;' })
  assert.deepEqual(problems, ['js/ out of order: js::responder uses js::teardown (outcome < in_call < thread < settle < socket < responder < teardown < completions)'])
})

test('the check fails when js/ uses a binding file above it, or has a file out of its order', () => {
  const problems = planted({
    'binding/js/thread.rs': 'use crate::binding::options::ConnectionOptions;',
    'binding/js/mod.rs': 'pub mod extra;',
    'binding/js/extra.rs': 'use super::outcome::Outcome;',
  })
  assert.deepEqual(problems.sort(), [
    'js/ reaches past what is below it: js::thread uses options (only sys, error, runtime)',
    'src/binding/js/extra has no place in the js/ order (outcome, in_call, thread, settle, socket, responder, teardown, completions)',
  ])
})

test("the check holds the core's tests and test support to their module's layer", () => {
  const problems = planted({
    'core/basics/resp_tests.rs': 'use crate::core::wait::owner::Owner;',
    'core/ops/test_support.rs': 'use crate::core::front::granted::Granted;',
  })
  assert.ok(problems.includes('upward import: basics::resp uses wait::owner'), problems.join('\n'))
  assert.ok(problems.includes('upward import: ops::test_support uses front::granted'), problems.join('\n'))
})

test('nothing in the core uses api, the top of its layers', () => {
  const problems = planted({ 'core/front/win.rs': 'use crate::core::api::Owner;' })
  assert.deepEqual(problems, ['upward import: front::win uses api'])
})

test('comments, strings and char literals are not read as code, whatever quotes they hold', () => {
  // Each once read as basics::keys using api (an upward import and a cycle): a quote opened
  // in one doc comment line and closed in the next, a `'"'` whose quote began a string that
  // ran on into code, and a block comment nested in another. A raw string's inner quotes
  // and `//` were read right before, and must stay so.
  const plants = [
    '/// Woken as "the first waiter of\n/// release_wake.lua", see crate::core::api::Locker and announce.lua.',
    "const QUOTE: u8 = b'\"';\n/// \"announce.lua\" wakes the first\nfn quoted() -> &'static str { \"crate::core::api::Locker\" }",
    '/* outer /* release_wake.lua */ crate::core::api::Locker */',
    'const RAW: &str = r#"a "quote" // and crate::core::api::Locker"#;',
  ]
  for (const line of plants) {
    assert.deepEqual(planted({ 'core/basics/keys.rs': line }), [], line)
    // Code after each is still read.
    const after = planted({ 'core/basics/keys.rs': `${line}\nuse crate::core::ops::lock::Locker;` })
    assert.ok(after.includes('upward import: basics::keys uses ops::lock'), `${line}\n${after.join('\n')}`)
  }
})

test('the check fails on an upward import, a cycle and a binding import', () => {
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'layers-'))
  try {
    fs.cpSync(path.join(root, 'src', 'core'), path.join(copy, 'src', 'core'), { recursive: true })
    const keys = path.join(copy, 'src', 'core', 'basics', 'keys.rs')
    fs.appendFileSync(keys, '\nuse crate::core::ops::lock::Locker;\nuse crate::binding::handle;\n')
    const { problems } = check(copy)
    assert.ok(problems.some((p) => p === 'upward import: basics::keys uses ops::lock'), problems.join('\n'))
    assert.ok(problems.some((p) => p.startsWith('import cycle:') && p.includes('basics::keys')), problems.join('\n'))
    assert.ok(problems.some((p) => p.includes('keys.rs mentions') && p.includes('crate::binding')), problems.join('\n'))
  } finally {
    fs.rmSync(copy, { recursive: true, force: true })
  }
})

test('no two types in src/ share a name, but for those left to the files being rewritten', () => {
  assert.deepEqual(names.check(root).problems, [])
})

test('the check fails when two types share a name, however deep or whatever their kind', () => {
  const problems = planted(
    {
      'core/basics/keys.rs': 'pub enum Lease { A }',
      'binding/js/outcome.rs': 'fn f() { type Queue = u8; }',
    },
    (copy) => names.check(copy).problems,
  )
  assert.equal(problems.length, 2, problems.join('\n'))
  assert.match(problems[0], /^Lease is defined 2 times: src\/core\/basics\/keys\.rs:\d+, src\/core\/basics\/lease\.rs:\d+$/)
  assert.match(problems[1], /^Queue is defined 2 times: src\/binding\/js\/outcome\.rs:\d+, src\/binding\/js\/outcome\.rs:\d+$/)
})

test("an impl's or trait's associated type is not a definition of its name", () => {
  const found = names.definitions('trait T { type Out: Clone; }\nimpl T for X { type Out = u8; }\nfn f() -> impl Iterator<Item = u8> { type Out = u8; }')
  assert.deepEqual(found, [
    { name: 'T', line: 1 },
    { name: 'Out', line: 3 },
  ])
})

test('the names left shared may only go: a third definition, or one gone, fails', () => {
  const left = { ...names.LEFT_SHARED, Lease: ['src/core/basics/lease.rs', 'src/core/basics/keys.rs'], Gone: ['src/a.rs', 'src/b.rs'] }
  const third = planted(
    { 'core/basics/keys.rs': 'struct Lease;', 'core/basics/token.rs': 'struct Lease;' },
    (copy) => names.check(copy, left).problems,
  )
  assert.equal(third.length, 2, third.join('\n'))
  assert.match(third[0], /^Lease is no longer defined just in src\/core\/basics\/lease\.rs and src\/core\/basics\/keys\.rs \(.*token\.rs:\d+\): update LEFT_SHARED/)
  assert.match(third[1], /^Gone is no longer defined just in src\/a\.rs and src\/b\.rs \(nowhere\)/)
  const allowed = planted({ 'core/basics/keys.rs': 'struct Lease;' }, (copy) => names.check(copy, left).problems)
  assert.deepEqual(allowed, [third[1]])
})

test('every file and name in ARCHITECTURE.md\'s "To change" table and glossary exists where it is said to be', () => {
  assert.deepEqual(architecture.check(root).problems, [])
})

test('the "To change Acquire" row sends a newcomer to at most 8 files', () => {
  const files = architecture.filesOfRow(root, 'Acquire')
  assert.ok(files.length >= 5, files.join('\n'))
  assert.ok(files.length <= 8, `${files.length} files:\n${files.join('\n')}`)
})

test('the table check fails on a file gone, a name moved out of its file, and a type renamed', () => {
  const doc = fs.readFileSync(path.join(root, 'ARCHITECTURE.md'), 'utf8')
  const planted = doc
    .replace('`ops/attempt.rs` (`attempt_with`', '`ops/attempt_terms.rs` (`attempt_with`')
    .replace('`ops/route.rs` (`FirstAttempt`)', '`ops/route.rs` (`Way`, `PlainAttempt`)')
    .replace('`front/win.rs` (`Win`, `settle`)', '`front/win.rs` (`Win`, `settle`), `Winnings`')
  assert.notEqual(planted, doc)
  assert.deepEqual(architecture.check(root, planted).problems, [
    'Acquire: `ops/attempt_terms.rs` does not exist',
    'Acquire: `PlainAttempt` is not defined in `ops/route.rs`',
    "An API's acquire: `Winnings` is found nowhere in src/, lib/ or the typings",
  ])
})

test('names are read as attached to the file they follow, in its parenthesis or right after it', () => {
  const items = architecture.parse('a `x/a.rs` (`A`, `b`/`c`: why; `D`), `x/b.lua` `e`, then `F` and `x/c.rs` + `x/d.rs`')
  assert.deepEqual(items, [
    { file: 'x/a.rs', names: ['A', 'b', 'c'] },
    { name: 'D' },
    { file: 'x/b.lua', names: ['e'] },
    { name: 'F' },
    { file: 'x/c.rs', names: [] },
    { file: 'x/d.rs', names: [] },
  ])
})
