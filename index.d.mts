// ESM view of index.d.ts: index.mjs re-exports the CommonJS module's names and exports the
// module itself as default.
import * as lib from './index.js'

export * from './index.js'
export default lib
