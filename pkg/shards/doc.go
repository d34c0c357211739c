// Package shards lists a Kinesis stream's shards, follows their lineage
// across splits and merges, decides which shards may be leased now, and
// creates a missing stream.
//
// A split closes one shard and opens two children; a merge closes two
// adjacent shards and opens one. The records of one partition key may sit on
// a parent and then on a child, so a child is read only after every parent
// is read to its end. Decide applies that rule, and the rest of SPEC §3, to a
// listing and the lease rows as a pure function: the coordinator lists
// (List), reads the rows (lease.Store.GetMany or List), calls Decide, and
// takes the lease of each shard in Decision.Leasable, in order. Decide
// explains every other shard with a Reason ("held by X until T", "finished",
// "waiting on parent P") for logs and tests.
//
// CreateIfMissing creates a missing stream in provisioned mode and waits
// (at most a minute by default) until it is ACTIVE; an existing stream is
// left as it is.
//
// The SDK interfaces (ListAPI, CreateAPI) are the few methods this package
// calls; *kinesis.Client satisfies both.
package shards
