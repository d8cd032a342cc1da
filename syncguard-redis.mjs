// `native-redis-lock/syncguard/redis` as an ES module.
import redis from './syncguard-redis.js'

export const { createRedisBackend, createLock } = redis
