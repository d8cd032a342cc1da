// ESM view of syncguard-redis.d.ts (see syncguard-redis.mjs).
export * from './syncguard-redis.js'
