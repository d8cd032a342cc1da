'use strict'

// syncguard runs on Bun too; our addon does not (Bun stubs the libuv functions it calls, and
// a call aborts the process). Refused at load, with the reason, rather than crashing later.
function refuseBun() {
  if (process.versions.bun !== undefined) {
    throw new Error(
      'native-redis-lock/syncguard needs Node.js (20 or later): its native addon uses libuv, which Bun does not provide. Run this program with node, or use syncguard itself under Bun.',
    )
  }
}

module.exports = { refuseBun }
