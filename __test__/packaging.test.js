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

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as '-', repeats numbered. */
function anchors(markdown) {
  const seen = new Map()
  const found = new Set()
  let fenced = false
  for (const line of markdown.split('\n')) {
    if (/^```/.test(line)) fenced = !fenced
    const heading = !fenced && /^#{1,6}\s+(.*)$/.exec(line)
    if (!heading) continue
    const slug = heading[1].trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-')
    const n = seen.get(slug) ?? 0
    seen.set(slug, n + 1)
    found.add(n === 0 ? slug : `${slug}-${n}`)
  }
  return found
}

test("README's links work on the npm page: anchors it has, files the package ships, or the repository package.json names", () => {
  const fs = require('node:fs')
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8')
  const [{ files }] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--loglevel=error'], { cwd: root, encoding: 'utf8' }))
  const packed = new Set(files.map((f) => f.path))
  // The one place the repository's address is written: README's links to files the package
  // does not ship follow it, so the address given for real is changed there and in README only.
  const repo = manifest.repository.url.replace(/^git\+/, '').replace(/\.git$/, '')
  assert.equal(manifest.homepage, `${repo}#readme`)
  assert.equal(manifest.bugs.url, `${repo}/issues`)
  const headings = anchors(readme)
  const links = [...readme.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1])
  assert.ok(links.length > 30, `${links.length} links`)
  for (const link of links) {
    if (link.startsWith('#')) {
      assert.ok(headings.has(link.slice(1)), `${link}: no such heading`)
      continue
    }
    assert.match(link, /^https?:\/\//, `${link}: a relative link breaks on the npm page`)
    const shipped = /^https:\/\/unpkg\.com\/(?:browse\/)?native-redis-lock\/(.*)$/.exec(link)
    if (shipped) {
      const file = shipped[1]
      assert.ok(file.endsWith('/') ? [...packed].some((f) => f.startsWith(file)) : packed.has(file), `${link}: ${file} is not shipped`)
      continue
    }
    if (!link.startsWith('https://github.com/')) continue // another site's page
    const ours = new RegExp(`^${repo.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/(?:blob|raw|tree)/main/([^#]+)`).exec(link)
    assert.ok(ours, `${link} is not under ${repo}, package.json's repository`)
    assert.ok(fs.existsSync(path.join(root, ours[1])), `${link}: no ${ours[1]} in this repository`)
  }
})
