// ESM view of distributed-lock.d.ts (see distributed-lock.mjs).
import * as lib from './distributed-lock.js'

export * from './distributed-lock.js'
export default lib
