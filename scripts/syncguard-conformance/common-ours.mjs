// Stands for syncguard's common/errors.js and common/auto-lock.js under `--target ours`: the
// tests' LockError (for instanceof) and lock() are ours, from the syncguard entry.
import { createRequire } from 'node:module'

const entry = createRequire(import.meta.url)(process.env.SG_CONF_ENTRY)
export const LockError = entry.LockError
export const lock = entry.lock
