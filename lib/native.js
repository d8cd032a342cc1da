'use strict'

// The generated loader; private to this package; the public API is lib/*.js.
module.exports = require('../binding.js')
