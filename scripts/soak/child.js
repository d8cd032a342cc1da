'use strict'

// A soak child: runs its traffic until the parent says stop, sends its samples and closing
// figures over IPC, then leaves the IPC channel and exits by itself (the parent times that).
const { runProcess } = require('./worker')

const settings = JSON.parse(process.env.SOAK_SETTINGS)
let stop
const stopped = new Promise((resolve) => (stop = resolve))
process.on('message', (message) => {
  if (message?.type === 'stop') stop()
})

runProcess({ ...settings, stopped, onSample: (s) => process.send({ type: 'sample', sample: s }) }).then(
  (result) => process.send({ type: 'done', result }, () => process.disconnect()),
  (err) => {
    process.send({ type: 'done', result: { pid: process.pid, failures: [`soak child failed: ${err?.stack ?? err}`] } }, () =>
      process.disconnect(),
    )
  },
)
