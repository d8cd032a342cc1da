'use strict'

// What `npm install native-redis-lock` needs of package.json, the lock file and the npm/
// platform packages, checked without installing anything (see packed-install.test.js).
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const path = require('node:path')
const { platforms } = require('../scripts/platforms')

const root = path.join(__dirname, '..')
const manifest = require('../package.json')

test('the platform packages, optionalDependencies and lock entries are in step with napi.targets', () => {
  execFileSync(process.execPath, [path.join(root, 'scripts', 'platforms.js'), '--check'], { stdio: 'pipe' })
  const names = platforms(manifest).map((p) => p.name)
  assert.equal(names.length, manifest.napi.targets.length)
  assert.deepEqual(Object.keys(manifest.optionalDependencies).sort(), [...names].sort())
  for (const [name, version] of Object.entries(manifest.optionalDependencies)) {
    assert.equal(version, manifest.version, `${name} is not at the main version`)
    assert.equal(require(path.join(root, 'npm', name.slice(manifest.name.length + 1), 'package.json')).version, manifest.version)
  }
})

test('the main tarball has no binary and every file the exports map names', () => {
  const [{ files }] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--loglevel=error'], { cwd: root, encoding: 'utf8' }))
  const packed = new Set(files.map((f) => f.path))
  assert.deepEqual([...packed].filter((f) => f.endsWith('.node')), [])
  const named = []
  const walk = (value) => (typeof value === 'string' ? named.push(value) : Object.values(value).forEach(walk))
  walk(manifest.exports)
  for (const file of [...named, manifest.main, manifest.types]) {
    assert.ok(packed.has(file.replace(/^\.\//, '')), `${file} is not in the tarball`)
  }
  for (const file of packed) assert.ok(!file.startsWith('__test__') && !file.startsWith('src/'), `${file} is shipped`)
  // The generated binding.d.ts is private: no public .d.ts imports it, so it does not ship.
  assert.ok(!packed.has('binding.d.ts'), 'binding.d.ts is shipped')
  for (const file of ['README.md', 'LICENSE', 'CHANGELOG.md', 'lib/cli/force-release.lua']) assert.ok(packed.has(file), `${file} is not shipped`)
  for (const bin of Object.values(manifest.bin)) assert.ok(packed.has(bin), `the bin ${bin} is not shipped`)
})

test('package.json says where the project lives, and its bin is executable', () => {
  for (const field of ['repository', 'homepage', 'bugs', 'keywords']) assert.ok(manifest[field], `${field} is missing`)
  assert.equal(manifest.bin['native-redis-lock'], 'bin/native-redis-lock.js')
  const bin = path.join(root, manifest.bin['native-redis-lock'])
  assert.match(require('node:fs').readFileSync(bin, 'utf8'), /^#!\/usr\/bin\/env node\n/)
  assert.ok(require('node:fs').statSync(bin).mode & 0o111, 'bin/native-redis-lock.js is not executable')
})
