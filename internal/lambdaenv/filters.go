package lambdaenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/shardloop/shardloop/pkg/filter"
	"github.com/shardloop/shardloop/pkg/reader"
)

// FilterCriteriaWant is what SHARDLOOP_FILTER_CRITERIA wants.
var FilterCriteriaWant = fmt.Sprintf(`a FilterCriteria as Lambda's API takes it, {"Filters": [{"Pattern": "<pattern>"}]}, of at most %d filters (docs/filtering.md)`, MaxFilters)

// CheckFilters checks the patterns of event filtering as the reader takes
// them (at most MaxFilters, each in the syntax of Lambda's event
// filtering). The error is the *filter.Error, naming the filter (from 1),
// where in its pattern the problem is, and what it is.
func CheckFilters(patterns []string) error {
	_, err := reader.CompileFilters(patterns)
	var fe *filter.Error
	if errors.As(err, &fe) {
		return fe
	}
	return err
}

// ParseFilterCriteria reads a FilterCriteria in the JSON of Lambda's API
// ({"Filters": [{"Pattern": "..."}]}) and returns its patterns, checked by
// CheckFilters. Empty (or only spaces) is no filters.
func ParseFilterCriteria(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var n struct{ Filters []json.RawMessage }
	if json.Unmarshal([]byte(s), &n) == nil && len(n.Filters) > MaxFilters {
		return nil, CheckFilters(make([]string, len(n.Filters))) // the count, whatever the patterns
	}
	set, err := filter.ParseCriteria([]byte(s))
	if err != nil {
		return nil, err
	}
	patterns := set.Patterns()
	if err := CheckFilters(patterns); err != nil {
		return nil, err
	}
	return patterns, nil
}

func (e *env) filterCriteria(name string) []string {
	v := e.get(name)
	patterns, err := ParseFilterCriteria(v)
	if err != nil {
		e.errs = append(e.errs, &Error{Var: name, Value: v, Want: FilterCriteriaWant + "; " + err.Error()})
		return nil
	}
	return patterns
}
