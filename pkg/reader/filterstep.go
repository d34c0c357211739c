package reader

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/pkg/filter"
)

// FilterError is a refused Options.FilterCriteria: Err names the filter (counted
// from 1 in the message), where in its pattern the problem is and what it
// is, or the list as a whole (too many filters). It matches ErrInvalid and
// unwraps to Err, which matches filter.ErrInvalid.
type FilterError struct {
	Err *filter.Error
}

func (e *FilterError) Error() string { return "reader: invalid FilterCriteria: " + e.Err.Error() }

// Is reports whether target is ErrInvalid.
func (e *FilterError) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the filter's own error.
func (e *FilterError) Unwrap() error { return e.Err }

// CompileFilters checks and compiles the patterns of a FilterCriteria as
// Options.FilterCriteria takes them: at most MaxFilters, each in the syntax of
// Lambda's event filtering (pkg/filter). A bad list is a *FilterError. The
// functions, the CLI and the CDK construct check their filters with it.
func CompileFilters(patterns []string) (*filter.Set, error) {
	if len(patterns) > MaxFilters {
		return nil, &FilterError{Err: &filter.Error{Index: -1, Problem: fmt.Sprintf(
			"%d filters: at most %d, as many as Lambda's event filtering allows per event source mapping by default", len(patterns), MaxFilters)}}
	}
	set, err := filter.Compile(patterns)
	if err != nil {
		var fe *filter.Error
		if errors.As(err, &fe) {
			return nil, &FilterError{Err: fe}
		}
		return nil, &FilterError{Err: &filter.Error{Index: -1, Problem: err.Error()}}
	}
	return set, nil
}

// compileFilters checks FilterCriteria and keeps them compiled for the run.
func (o *Options) compileFilters() error {
	o.filters = nil
	if len(o.FilterCriteria) == 0 {
		return nil
	}
	set, err := CompileFilters(o.FilterCriteria)
	if err != nil {
		return err
	}
	o.filters = set
	return nil
}

// passes reports whether a record passes the run's filters (every record
// does when there are none).
func (r *run) passes(rec types.Record) bool {
	if r.o.filters == nil {
		return true
	}
	fr := filter.Record{Data: rec.Data, PartitionKey: aws.ToString(rec.PartitionKey), SequenceNumber: aws.ToString(rec.SequenceNumber)}
	if rec.ApproximateArrivalTimestamp != nil {
		fr.ApproximateArrivalTimestamp = *rec.ApproximateArrivalTimestamp
	}
	return r.o.filters.Match(fr)
}

// passing counts the records of recs that will be delivered as far as the
// filters tell (an aggregated record counts as one), so that a batching
// window gathers BatchSize records that pass.
func (r *run) passing(recs []types.Record) int {
	if r.o.filters == nil {
		return len(recs)
	}
	n := 0
	for _, rec := range recs {
		if IsAggregated(rec.Data) || r.passes(rec) {
			n++
		}
	}
	return n
}

// filterSubs keeps the user records of a de-aggregated unit that pass the
// filters, and counts the others as filtered out. A unit left with none is
// consumed like a plain record that matched no filter.
func (r *run) filterSubs(u unit) unit {
	if r.o.filters == nil {
		return u
	}
	recs, subs := u.recs[:0:0], u.subs[:0:0]
	for i, rec := range u.recs {
		if r.passes(rec) {
			recs = append(recs, rec)
			subs = append(subs, u.subs[i])
		}
	}
	r.filteredOut(len(u.recs) - len(recs))
	u.recs, u.subs = recs, subs
	return u
}
