'use strict'

// The syncguard stand-in's backend: acquire + release (see bench/lib/syncguard.js and the
// stand-in's header, __test__/helpers/syncguard-standin.js, for what it follows).
const { backendRow } = require('../lib/syncguard')
const { openStandin } = require('./original-syncguard-lock')

module.exports = backendRow({ name: 'original: syncguard backend (stand-in)', kind: 'original', open: openStandin })
