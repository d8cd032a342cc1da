#!/usr/bin/env node
'use strict'

// `npx native-redis-lock <command>`: see lib/cli/main.js, or run it with --help.
require('../lib/cli/main')
  .main(process.argv.slice(2))
  .then((code) => {
    process.exitCode = code
  })
