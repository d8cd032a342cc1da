'use strict'

// The package as a user gets it: `npm pack` of the main package and of the platform package
// that carries the freshly built binary, installed into a fresh project with a PATH that has
// no Rust toolchain and no napi CLI. There, CommonJS and ESM scripts use every subpath of the
// exports map against a private redis-server, and tsc --strict type-checks a usage of every
// subpath under the three module resolutions users run, on lib ES2020 with skipLibCheck off.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFile } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { startRedis } = require('./helpers/redis-server')
const { platforms } = require('../scripts/platforms')

const root = path.join(__dirname, '..')
const manifest = require('../package.json')
const platform = platforms(manifest).find((p) => p.triple === 'x86_64-unknown-linux-gnu')
const SUBPATHS = Object.keys(manifest.exports).filter((subpath) => subpath !== './package.json')
// A PATH a user's machine could have: node and npm, the system's tools, nothing of Rust.
const PATH = [path.dirname(process.execPath), '/usr/bin', '/bin'].join(path.delimiter)

let scratch
let app
let server

function run(file, args, options = {}) {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: 180_000, maxBuffer: 16 * 1024 * 1024, ...options, env: { HOME: os.homedir(), PATH, ...options.env } }, (err, stdout, stderr) =>
      resolve({ code: err ? (err.code ?? err.signal) : 0, stdout, stderr }),
    )
  })
}

async function npm(args, cwd) {
  const result = await run('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd })
  assert.equal(result.code, 0, `npm ${args.join(' ')} in ${cwd}:\n${result.stderr}`)
  return result.stdout
}

/** `npm pack` of `dir` into the scratch directory; the tarball's path. */
async function pack(dir) {
  const [{ filename, files }] = JSON.parse(await npm(['pack', '--json', '--pack-destination', scratch], dir))
  return { tarball: path.join(scratch, filename), files: files.map((f) => f.path) }
}

before(async () => {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'packed-'))
  server = await startRedis()
})

after(async () => {
  if (scratch) fs.rmSync(scratch, { recursive: true, force: true })
  await server?.close()
})

test('the PATH of the install has no cargo, rustc or napi', async () => {
  for (const tool of ['cargo', 'rustc', 'napi']) {
    const found = await run('sh', ['-c', `command -v ${tool}`])
    assert.notEqual(found.code, 0, `${tool} is on the PATH: ${found.stdout}`)
  }
  const npmFound = await run('sh', ['-c', 'command -v npm'])
  assert.equal(npmFound.code, 0, 'npm is required on the PATH for this test')
})

test('both tarballs install into a fresh project without Rust', async () => {
  const built = path.join(root, platform.file)
  assert.ok(fs.existsSync(built), `${platform.file} is not built: run npm run build`)
  const main = await pack(root)
  assert.deepEqual(main.files.filter((f) => f.endsWith('.node')), [], 'the main package carries a binary')
  const platformDir = path.join(scratch, 'platform')
  fs.cpSync(path.join(root, 'npm', platform.dir), platformDir, { recursive: true })
  fs.copyFileSync(built, path.join(platformDir, platform.file))
  const binary = await pack(platformDir)
  assert.ok(binary.files.includes(platform.file), `the platform package lacks ${platform.file}`)

  app = path.join(scratch, 'app')
  fs.mkdirSync(app)
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }))
  const devVersions = manifest.devDependencies
  await npm(['install', '--prefer-offline', main.tarball, binary.tarball, `typescript@${devVersions.typescript}`, `@types/node@${devVersions['@types/node']}`], app)
  const installed = path.join(app, 'node_modules', manifest.name)
  assert.ok(fs.existsSync(path.join(app, 'node_modules', platform.name, platform.file)), 'the binary was not installed')
  assert.equal(fs.readdirSync(installed).filter((f) => f.endsWith('.node')).length, 0)
})

/** Usage of each subpath, as a script body with `lib` the module and `url` the server. */
const USES = {
  '.': `
    const lock = new lib.DistributedLock(url)
    const handle = await lock.acquire('packed:main', 10000)
    assert.equal(await lock.isLocked('packed:main'), true)
    assert.ok(handle instanceof lib.LockHandle)
    assert.match(handle.fence, /^\\d{15}$/)
    await handle.release()
    assert.equal(await lock.isLocked('packed:main'), false)
    assert.ok(new lib.LockAcquisitionError('k', 0) instanceof lib.LockError)`,
  './distributed-lock': `
    const lock = new lib.DistributedLock(url)
    const handle = await lock.tryAcquire('packed:distributed', 10000)
    assert.ok(handle)
    assert.equal(await lock.tryAcquire('packed:distributed', 10000), null)
    await handle.release()`,
  './exclusive-lock': `
    const ExclusiveLock = lib.default ?? lib
    const lock = new ExclusiveLock({ name: 'packed', cache_connection: url })
    assert.equal(await lock.acquire(), true)
    assert.equal((await lock.inspect()).lock_contents, '1')
    await lock.release()
    assert.equal(await lock.inspect(), null)`,
  './maestro': `
    const DistributedLockService = lib.default ?? lib
    const service = new DistributedLockService('packed:maestro', 5000, url)
    assert.equal(await service.acquire(), true)
    assert.equal(await service.release(), true)`,
  './syncguard': `
    const backend = lib.createRedisBackend(url, { keyPrefix: 'packed' })
    const won = await backend.acquire({ key: 'packed:syncguard', ttlMs: 10000 })
    assert.equal(won.ok, true)
    assert.match(won.fence, /^\\d{15}$/)
    assert.equal(await backend.isLocked({ key: 'packed:syncguard' }), true)
    assert.equal((await won.release()).ok, true)
    assert.equal(await lib.lock(backend, async () => 7, { key: 'packed:syncguard' }), 7)
    assert.equal(lib.hashKey('abc'), '0001786200483126a9ab02ae')
    assert.equal(new lib.LockError('Internal').name, 'LockError')`,
  './syncguard/redis': `
    const withLock = lib.createLock(url)
    assert.equal(await withLock(async () => 'done', { key: 'packed:syncguard-redis', ttlMs: 5000 }), 'done')
    assert.equal(await lib.createRedisBackend(url).isLocked({ key: 'packed:syncguard-redis' }), false)`,
  './syncguard/common': `
    assert.equal(lib.formatFence(7), '000000000000007')
    assert.deepEqual(lib.mapToMutationResult(lib.mapRedisScriptResult(-2)), { ok: false, reason: 'expired' })
    assert.equal(lib.mergeAcquisitionConfig(undefined).maxRetries, lib.LOCK_DEFAULTS.maxRetries)
    assert.equal(typeof lib.createAutoLock, 'function')
    assert.equal(lib.createRedisBackend, undefined)`,
}

test('every subpath of the exports map has a usage here', () => {
  assert.deepEqual(Object.keys(USES).sort(), [...SUBPATHS].sort())
})

function specifier(subpath) {
  return subpath === '.' ? manifest.name : `${manifest.name}/${subpath.slice(2)}`
}

for (const kind of ['CommonJS', 'ESM']) {
  test(`a ${kind} script uses every subpath against a real redis-server`, async () => {
    assert.ok(app, 'the install failed')
    const body = SUBPATHS.map((subpath) => {
      const load = kind === 'ESM' ? `await import(${JSON.stringify(specifier(subpath))})` : `require(${JSON.stringify(specifier(subpath))})`
      return `{ const lib = ${load}\n${USES[subpath]}\n  console.log('ok ${subpath}') }`
    }).join('\n')
    const header = kind === 'ESM' ? "import assert from 'node:assert/strict'\n" : "'use strict'\nconst assert = require('node:assert/strict')\n"
    const source = `${header}const url = process.env.REDIS_URL\n${kind === 'ESM' ? body : `;(async () => {\n${body}\n})().catch((err) => { console.error(err); process.exitCode = 1 })`}\n`
    const file = path.join(app, kind === 'ESM' ? 'use.mjs' : 'use.cjs')
    fs.writeFileSync(file, source)
    const result = await run(process.execPath, [file], { cwd: app, env: { REDIS_URL: server.url } })
    assert.equal(result.code, 0, result.stderr + result.stdout)
    assert.deepEqual(result.stdout.trim().split('\n'), SUBPATHS.map((subpath) => `ok ${subpath}`))
  })
}

test('the installed bin runs: npx native-redis-lock list against the real server', async () => {
  assert.ok(app, 'the install failed')
  const bin = path.join(app, 'node_modules', '.bin', 'native-redis-lock')
  const result = await run(bin, ['list', 'packed:*', '--json'], { cwd: app, env: { REDIS_URL: server.url } })
  assert.equal(result.code, 0, result.stderr)
  assert.ok(Array.isArray(JSON.parse(result.stdout)))
  const none = await run(bin, ['list'], { cwd: app, env: {} })
  assert.equal(none.code, 3, none.stderr)
})

test('the shipped examples run from the installed package, on memory:// and the real server', async () => {
  assert.ok(app, 'the install failed')
  const dir = path.join(app, 'node_modules', manifest.name, 'examples')
  const shipped = fs.readdirSync(dir).filter((f) => f.endsWith('.js'))
  assert.deepEqual(shipped.sort(), fs.readdirSync(path.join(root, 'examples')).filter((f) => f.endsWith('.js')).sort())
  // @opentelemetry/api is an optional peer, not installed here: that example says how to get it.
  for (const file of shipped.filter((f) => f !== 'opentelemetry.js')) {
    for (const env of [{}, { REDIS_URL: server.url }]) {
      const result = await run(process.execPath, [path.join(dir, file)], { cwd: app, env })
      assert.equal(result.code, 0, `${file} ${JSON.stringify(env)}: ${result.stderr}`)
      assert.match(result.stdout, /^backend: (memory:\/\/examples|REDIS_URL)\n/, file)
    }
  }
})

const ESM_TYPES = `
import lib, { DistributedLock, LockHandle, LockError, LockAcquisitionError, InvalidLockError, LockLostError, ExclusiveLock as Named, type LockOptions, type LockInfo } from 'native-redis-lock'
import * as distributed from 'native-redis-lock/distributed-lock'
import ExclusiveLock, { ExclusiveLock as NamedExclusive } from 'native-redis-lock/exclusive-lock'
import DistributedLockService, { DistributedLockService as NamedService } from 'native-redis-lock/maestro'
import { createRedisBackend, lock as sgLock, type LockInfo as SgLockInfo, type RedisBackendOptions } from 'native-redis-lock/syncguard'
import { createLock, type RedisCapabilities } from 'native-redis-lock/syncguard/redis'
import { formatFence, mapBackendObservation, type MutationCondition, type LockBackend as SgBackend } from 'native-redis-lock/syncguard/common'

export function common(backend: SgBackend<RedisCapabilities>): string {
  const condition: MutationCondition = mapBackendObservation(1)
  return formatFence(1n) + condition + backend.capabilities.backend
}

export async function syncguard(url: string): Promise<string> {
  const options: RedisBackendOptions = { keyPrefix: 'app', commandTimeoutMs: 1000 }
  const backend = createRedisBackend(url, options)
  const won = await backend.acquire({ key: 'k', ttlMs: 1000 })
  const fence: string = won.ok ? won.fence : ''
  await won[Symbol.asyncDispose]()
  const info: SgLockInfo<RedisCapabilities> | null = await backend.lookup({ lockId: 'AAAAAAAAAAAAAAAAAAAAAA' })
  const n: number = await sgLock(backend, () => 1, { key: 'k', acquisition: { maxRetries: 1 } })
  const s: string = await createLock(url)(async () => 's', { key: 'k' })
  createRedisBackend({ eval: async (script: string, numKeys: number, ...rest: string[]) => [script, numKeys, rest] })
  return fence + (info?.fence ?? '') + n + s
}

export async function use(url: string): Promise<string> {
  const options: LockOptions = { keyPrefix: 'app:', lendOnHandover: false }
  const lock: DistributedLock = new lib.DistributedLock(url, options)
  const handle: LockHandle = await new distributed.DistributedLock(url).acquire('k', 1000)
  const info: LockInfo = handle.info
  await handle[Symbol.asyncDispose]()
  const exclusive: Named = new ExclusiveLock({ name: 'n', cache_connection: url })
  const same: NamedExclusive = exclusive
  const held: boolean = same.acquired && exclusive.refresh_timer !== null
  const service: NamedService = new DistributedLockService('k', 1000, url)
  const errors = [new LockAcquisitionError('k', 1), new InvalidLockError('k'), new LockLostError('k'), new LockError('m', 'ENOPERM')]
  return String(await lock.isLocked('k')) + info.fence + held + service.lockValue + errors.length
}
`

const CJS_TYPES = `
import lib = require('native-redis-lock')
import distributed = require('native-redis-lock/distributed-lock')
import ExclusiveLock = require('native-redis-lock/exclusive-lock')
import DistributedLockService = require('native-redis-lock/maestro')
import sg = require('native-redis-lock/syncguard')
import sgRedis = require('native-redis-lock/syncguard/redis')
import sgCommon = require('native-redis-lock/syncguard/common')

export function common(): Promise<number> {
  const merged: number = sgCommon.mergeBackendConfig({}).ttlMs
  return sgCommon.delay(0).then(() => merged)
}

export async function syncguard(url: string): Promise<boolean> {
  const backend: sg.LockBackend<sg.RedisCapabilities> = sgRedis.createRedisBackend(url, { cleanupInIsLocked: true })
  const won = await backend.acquire({ key: 'k', ttlMs: 1000 })
  const fenced: boolean = won.ok && won.fence.length === 15
  return fenced && (await sg.lock(backend, async () => true, { key: 'k' })) && sg.hashKey('k').length === 24
}

export async function use(url: string): Promise<boolean> {
  const handle: lib.LockHandle = await new distributed.DistributedLock(url).acquire('k')
  const exclusive = new ExclusiveLock({ name: 'n', cache_connection: url })
  const service = new DistributedLockService('k', 1000, url)
  return handle.isHeld && exclusive.acquired && service.isLocked && new lib.LockError('m', 'EAUTH').code === 'EAUTH'
}
`

const RESOLUTIONS = [
  { moduleResolution: 'node16', module: 'node16', files: ['use-esm.mts', 'use-cjs.cts'] },
  { moduleResolution: 'nodenext', module: 'nodenext', files: ['use-esm.mts', 'use-cjs.cts'] },
  { moduleResolution: 'bundler', module: 'esnext', files: ['use-esm.mts'] },
]

for (const settings of RESOLUTIONS) {
  test(`tsc --noEmit --strict type-checks every subpath under moduleResolution ${settings.moduleResolution}, lib ES2020, skipLibCheck off`, async () => {
    assert.ok(app, 'the install failed')
    fs.writeFileSync(path.join(app, 'use-esm.mts'), ESM_TYPES)
    fs.writeFileSync(path.join(app, 'use-cjs.cts'), CJS_TYPES)
    const config = `tsconfig.${settings.moduleResolution}.json`
    fs.writeFileSync(
      path.join(app, config),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          target: 'ES2020',
          lib: ['ES2020'],
          types: ['node'],
          skipLibCheck: false,
          module: settings.module,
          moduleResolution: settings.moduleResolution,
        },
        files: settings.files,
      }),
    )
    const tsc = path.join(app, 'node_modules', 'typescript', 'bin', 'tsc')
    const result = await run(process.execPath, [tsc, '-p', config], { cwd: app })
    assert.equal(result.code, 0, result.stdout + result.stderr)
    assert.equal(result.stdout, '')
  })
}
