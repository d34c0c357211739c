// Package filter is Lambda's event filtering for Kinesis records: the
// FilterCriteria of an event source mapping, with the trigger's pattern
// syntax and semantics, so that a mapping's filters translate one to one.
//
// Compile checks and compiles the patterns of one FilterCriteria (up to
// MaxFilters); a bad pattern is an *Error (matching ErrInvalid) that names
// the filter, the place in its pattern and the problem, so configuration
// fails where it is given. (*Set).Match tells whether a record passes: a
// record passes when any filter matches it, and a Set of no filters passes
// everything. A record that passes no filter is consumed without being
// delivered; deciding that, and counting it, is the reader's business.
//
// A pattern names the record's fields at its top level: "data", the
// payload parsed as JSON (filters on it go inside, as in
// {"data": {"order": {"type": ["buy"]}}}), and the metadata fields
// "partitionKey", "sequenceNumber", "approximateArrivalTimestamp" (a
// number of seconds, as in Lambda's event) and "kinesisSchemaVersion".
// The rules are EventBridge's, as far as Lambda takes them: exact values
// (strings, numbers by their text, true, false, null, "" for empty),
// prefix, suffix, equals-ignore-case (also inside prefix and suffix),
// anything-but (values or lists of values), numeric (=, <, <=, >, >= and
// ranges, between -5e9 and 5e9 with six decimals), exists, and $or across
// fields. Arrays in the data match when any element does, with fields
// matched together taken from one element. wildcard, cidr and anything-but
// with prefix, suffix, equals-ignore-case or wildcard are EventBridge
// operators Lambda does not take, and Compile refuses them.
//
// A filter that names data never matches a record whose data is not JSON
// (Lambda drops such a record); a filter that names only metadata matches
// on the metadata whatever the data is. Match parses a record's data once,
// only if some filter needs it, into scratch space that is reused, so
// matching allocates nothing in the steady state. docs/filtering.md is the
// user's guide, with the documentation each rule comes from.
package filter
