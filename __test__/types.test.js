'use strict'

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const path = require('node:path')

const root = path.join(__dirname, '..')

test('index.d.ts type-checks a usage file under tsc --noEmit --strict', () => {
  const tsc = require.resolve('typescript/bin/tsc')
  let output = ''
  try {
    execFileSync(process.execPath, [tsc, '-p', path.join(__dirname, 'types'), '--noEmit', '--strict'], {
      cwd: root,
      encoding: 'utf8',
    })
  } catch (err) {
    output = `${err.stdout}${err.stderr}`
  }
  assert.equal(output, '', output)
})

test('public signatures contain no `any`', () => {
  const fs = require('node:fs')
  for (const file of ['index.d.ts', 'distributed-lock.d.ts', 'syncguard.d.ts', 'syncguard-redis.d.ts']) {
    const text = fs.readFileSync(path.join(root, file), 'utf8')
    assert.doesNotMatch(text, /\bany\b/, file)
  }
})

/**
 * For each of `typesFiles`, the value names it declares as exported, each with the methods
 * its declared classes promise: `{ name, isClass, methods, statics }`. `name` is null for an
 * `export =` module (the module itself is the value). One program for all: each costs seconds.
 */
function declaredValues(typesFiles) {
  const ts = require('typescript')
  const program = ts.createProgram(typesFiles, {
    strict: true,
    noEmit: true,
    module: ts.ModuleKind.Node16,
    moduleResolution: ts.ModuleResolutionKind.Node16,
    target: ts.ScriptTarget.ES2022,
    types: ['node'],
  })
  const checker = program.getTypeChecker()
  const resolve = (s) => (s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s)
  // Symbol-keyed members (`[Symbol.asyncDispose]`) have internal names; they are not looked up by name.
  const methodsOf = (type) =>
    checker
      .getPropertiesOfType(type)
      .filter((p) => p.flags & ts.SymbolFlags.Method && !p.name.startsWith('__@'))
      .map((p) => p.name)
  const describe = (name, s) => {
    const target = resolve(s)
    const isClass = (target.flags & ts.SymbolFlags.Class) !== 0
    return {
      name,
      isClass,
      methods: isClass ? methodsOf(checker.getDeclaredTypeOfSymbol(target)) : [],
      statics: isClass ? methodsOf(checker.getTypeOfSymbol(target)) : [],
    }
  }
  return typesFiles.map((typesFile) => {
    const moduleSymbol = checker.getSymbolAtLocation(program.getSourceFile(typesFile))
    const exportEquals = moduleSymbol.exports.get('export=')
    if (exportEquals) return [describe(null, exportEquals)]
    return checker
      .getExportsOfModule(moduleSymbol)
      .filter((s) => resolve(s).flags & ts.SymbolFlags.Value)
      .map((s) => describe(s.name, s))
  })
}

/** What each entry of package.json's `exports` declares and loads, per condition. */
function entries() {
  const pkg = require('../package.json')
  const found = []
  for (const [subpath, conditions] of Object.entries(pkg.exports)) {
    if (typeof conditions === 'string') continue
    for (const condition of ['require', 'import']) {
      const { types, default: runtime } = conditions[condition]
      found.push({ specifier: path.posix.join('native-redis-lock', subpath), condition, types, runtime })
    }
  }
  return found
}

test("every value each entry's types declare exists at run time in that entry, with its classes' methods", async () => {
  const { pathToFileURL } = require('node:url')
  const list = entries()
  assert.ok(list.length >= 8, `${list.length} entries`)
  const declared = declaredValues(list.map((entry) => path.join(root, entry.types)))
  const problems = []
  for (const [i, { specifier, condition, types, runtime }] of list.entries()) {
    const file = path.join(root, runtime)
    const loaded = condition === 'require' ? require(file) : await import(pathToFileURL(file).href)
    for (const { name, isClass, methods, statics } of declared[i]) {
      const where = `${condition} ${specifier}${name === null ? '' : ` { ${name} }`} (declared in ${types})`
      const value = name === null ? loaded : loaded[name]
      if (value === undefined) {
        problems.push(`${where}: undefined at run time`)
        continue
      }
      if (!isClass) continue
      if (typeof value !== 'function') {
        problems.push(`${where}: declared a class, is ${typeof value}`)
        continue
      }
      for (const method of methods) {
        if (typeof value.prototype[method] !== 'function') problems.push(`${where}: no method ${method}()`)
      }
      for (const method of statics) {
        if (typeof value[method] !== 'function') problems.push(`${where}: no static ${method}()`)
      }
    }
  }
  assert.deepEqual(problems, [])
})
