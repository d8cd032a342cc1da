// ESM view of syncguard.d.ts (see syncguard.mjs): the same named exports, no default, as
// syncguard itself has none.
export * from './syncguard.js'
