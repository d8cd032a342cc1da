// ESM view of syncguard-common.d.ts (see syncguard-common.mjs).
export * from './syncguard-common.js'
