// Stands for syncguard's common/errors.js and common/auto-lock.js under `--target ours`: the
// tests' LockError (for instanceof) and lock() are ours, from the syncguard entry's ESM file.
import { pathToFileURL } from 'node:url'

const entry = await import(pathToFileURL(process.env.SG_CONF_ENTRY).href)
export const LockError = entry.LockError
export const lock = entry.lock
