// Starts dynalite's own command line (node dynalite.js --port ...), with one
// difference: dynalite throws from a request's 'error' event when a client
// gives up on a request before it was read whole (the AWS SDK for Go does
// when an attempt times out or its context ends), and that kills the
// server for every other client. A client that walks away is no reason for
// the emulator to die: those errors are dropped here; any other still ends
// the process.
process.on('uncaughtException', (err) => {
  if (err && (err.code === 'ECONNRESET' || err.code === 'EPIPE' || err.message === 'aborted')) {
    return
  }
  console.error(err)
  process.exit(1)
})
require('dynalite/cli.js')
