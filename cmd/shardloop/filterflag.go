package main

import (
	"fmt"
	"strings"

	"github.com/shardloop/shardloop/internal/lambdaenv"
)

var filterUsage = fmt.Sprintf("an event filtering pattern, as the Pattern of a FilterCriteria (docs/filtering.md); repeat for up to %d, a record passing when any matches; records that match none are passed without delivery", lambdaenv.MaxFilters)

// filterFlag is run's --filter, given once per pattern.
type filterFlag []string

func (f *filterFlag) String() string { return strings.Join(*f, " ") }

func (f *filterFlag) Set(p string) error {
	*f = append(*f, p)
	return nil
}

// check checks the patterns as the shardreader does, naming the flag, the
// filter (from 1) and the problem.
func (f filterFlag) check() error {
	if err := lambdaenv.CheckFilters(f); err != nil {
		return bad("--filter: %v", err)
	}
	return nil
}
