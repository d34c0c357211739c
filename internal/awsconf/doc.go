// Package awsconf is the one place that bounds shardloop's AWS calls: how
// long one attempt of a call may take, how many attempts a call makes and
// how long it waits between them, per service. The CLI and both Lambda
// functions build every SDK client through it, so no call hangs on an
// endpoint that accepts connections and never answers.
//
// The bounds follow from the lease (lease.DefaultDuration 10 s, renewed
// every lease.DefaultRenewInterval 3 s): a DynamoDB call of the lease store
// gives up well inside one renew interval, and a Kinesis call well inside
// one lease. GetRecords's attempt fits a 10 MB answer, and one that timed
// out is not sent again as it was: the reader asks for fewer records (a
// read runs under its lease, which ends it if lost). The client that
// invokes the user's target is different: an Invoke that may have run is
// never sent again
// (a second one would overlap the first), and its attempt outlasts the
// target's own timeout, so that Lambda's answer, a timeout included, comes
// back before ours gives up.
//
// An attempt that runs out of time fails with a *TimeoutError naming the
// service, the operation, the endpoint and the bound; the SDK wraps it in
// its operation error ("operation error Kinesis: GetRecords, ...").
package awsconf
