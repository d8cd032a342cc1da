'use strict'

// The platform packages, derived from package.json `napi.targets`, the one list of targets:
// each npm/<platform>/package.json, the main package's optionalDependencies (every platform
// package at exactly the main version), and their entries in package-lock.json (npm records
// no entry for an optional dependency it cannot fetch, and `npm ci` then refuses the lock;
// an entry with the platform's os/cpu/libc lets it skip foreign platforms and a 404 alike,
// and is what npm writes itself once it has one).
//
//   node scripts/platforms.js          writes them
//   node scripts/platforms.js --check  exits 1, naming what is out of date
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')
const PLATFORMS = {
  'x86_64-unknown-linux-gnu': { dir: 'linux-x64-gnu', os: 'linux', cpu: 'x64', libc: 'glibc' },
  'aarch64-unknown-linux-gnu': { dir: 'linux-arm64-gnu', os: 'linux', cpu: 'arm64', libc: 'glibc' },
  'x86_64-unknown-linux-musl': { dir: 'linux-x64-musl', os: 'linux', cpu: 'x64', libc: 'musl' },
  'aarch64-unknown-linux-musl': { dir: 'linux-arm64-musl', os: 'linux', cpu: 'arm64', libc: 'musl' },
  'x86_64-apple-darwin': { dir: 'darwin-x64', os: 'darwin', cpu: 'x64' },
  'aarch64-apple-darwin': { dir: 'darwin-arm64', os: 'darwin', cpu: 'arm64' },
  'x86_64-pc-windows-msvc': { dir: 'win32-x64-msvc', os: 'win32', cpu: 'x64' },
}

const read = (file) => JSON.parse(fs.readFileSync(path.join(root, file), 'utf8'))
const json = (value) => `${JSON.stringify(value, null, 2)}\n`

/** Every platform package: `{ triple, dir, name, file, manifest, readme }`. */
function platforms(main = read('package.json')) {
  const binary = main.napi.binaryName
  return main.napi.targets.map((triple) => {
    const platform = PLATFORMS[triple]
    if (!platform) throw new Error(`no npm platform known for the target ${triple}`)
    const name = `${main.name}-${platform.dir}`
    const file = `${binary}.${platform.dir}.node`
    const manifest = {
      name,
      version: main.version,
      description: `The ${triple} binary of ${main.name}`,
      license: main.license,
      main: file,
      files: [file],
      os: [platform.os],
      cpu: [platform.cpu],
      ...(platform.libc ? { libc: [platform.libc] } : {}),
      engines: main.engines,
      ...(main.repository ? { repository: main.repository } : {}),
    }
    const readme = `# \`${name}\`\n\nThe **${triple}** binary of [\`${main.name}\`](https://www.npmjs.com/package/${main.name}). Install \`${main.name}\`, not this package: npm picks the binary for your platform.\n`
    return { triple, ...platform, name, file, manifest, readme }
  })
}

/** What package.json and package-lock.json should say of the platform packages. */
function expected() {
  const main = read('package.json')
  const all = platforms(main)
  // Sorted, and each entry as npm itself writes it, so that an `npm install` leaves them be.
  const sorted = [...all].sort((a, b) => (a.name < b.name ? -1 : 1))
  const optionalDependencies = Object.fromEntries(sorted.map((p) => [p.name, main.version]))
  const lockEntries = Object.fromEntries(
    sorted.map((p) => [
      `node_modules/${p.name}`,
      {
        version: main.version,
        cpu: [p.cpu],
        ...(p.libc ? { libc: [p.libc] } : {}),
        license: main.license,
        optional: true,
        os: [p.os],
      },
    ]),
  )
  return { main, all, optionalDependencies, lockEntries }
}

/** The files and their wanted contents. */
function wanted() {
  const { main, all, optionalDependencies, lockEntries } = expected()
  const files = new Map()
  for (const p of all) {
    files.set(`npm/${p.dir}/package.json`, json(p.manifest))
    files.set(`npm/${p.dir}/README.md`, p.readme)
  }
  files.set('package.json', json({ ...main, optionalDependencies }))
  const lock = read('package-lock.json')
  lock.packages[''].optionalDependencies = optionalDependencies
  for (const name of Object.keys(lock.packages)) {
    if (name.startsWith(`node_modules/${main.name}-`) && !lockEntries[name]) delete lock.packages[name]
  }
  Object.assign(lock.packages, lockEntries)
  // npm keeps the root first and the rest in key order.
  const [rootEntry, ...rest] = Object.keys(lock.packages)
  lock.packages = Object.fromEntries([rootEntry, ...rest.sort()].map((name) => [name, lock.packages[name]]))
  files.set('package-lock.json', json(lock))
  return files
}

function main() {
  const check = process.argv.includes('--check')
  const stale = []
  for (const [file, text] of wanted()) {
    const at = path.join(root, file)
    const current = fs.existsSync(at) ? fs.readFileSync(at, 'utf8') : null
    if (current === text) continue
    stale.push(file)
    if (!check) {
      fs.mkdirSync(path.dirname(at), { recursive: true })
      fs.writeFileSync(at, text)
    }
  }
  if (check && stale.length > 0) {
    process.stderr.write(`out of date (run node scripts/platforms.js): ${stale.join(', ')}\n`)
    process.exitCode = 1
  } else if (!check) {
    process.stdout.write(stale.length > 0 ? `wrote ${stale.join(', ')}\n` : 'up to date\n')
  }
}

if (require.main === module) main()

module.exports = { platforms, PLATFORMS }
