package shards

import (
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// serverTimeKey keys a server time set by SetServerTime.
type serverTimeKey struct{}

// ServerTime returns the time on Kinesis's clock when it answered the call
// whose result metadata is md: the Date header of a real response (whole
// seconds, rounded down), or the time a fake set with SetServerTime. ok is
// false when neither is known.
//
// Positions pinned at the tip of a shard are taken on this clock, the one
// that stamps records' ApproximateArrivalTimestamp, never on the host's:
// a host whose clock runs ahead would otherwise pin past records it owes.
func ServerTime(md middleware.Metadata) (time.Time, bool) {
	if t, ok := md.Get(serverTimeKey{}).(time.Time); ok {
		return t, true
	}
	if t, ok := awsmiddleware.GetServerTime(md); ok && !t.IsZero() {
		return t, true
	}
	return time.Time{}, false
}

// TipPinnedAt is where a position pinned at the tip of a shard goes when
// Kinesis's time is serverNow: one second earlier, to the millisecond. The
// Date header the time comes from is rounded down to the second, and
// arrival times are stamped by other hosts of the service, so a record that
// arrived just before may be read again; none after it is skipped. The
// coordinator pins a generation's tip by it and a reader a row's first
// opening.
func TipPinnedAt(serverNow time.Time) time.Time {
	return serverNow.Add(-time.Second).Truncate(time.Millisecond)
}

// SetServerTime records t as the server's time of an answer, for in-memory
// Kinesis implementations that build results without an HTTP response.
func SetServerTime(md *middleware.Metadata, t time.Time) {
	md.Set(serverTimeKey{}, t)
}
