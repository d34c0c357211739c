package lambdaenv_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/shardloop/shardloop/internal/lambdaenv"
)

// TestReaderFromEnv_FilterCriteriaIsTheTriggersJSONCheckedAtColdStart:
// SHARDLOOP_FILTER_CRITERIA takes a FilterCriteria as Lambda's API writes
// it and hands its patterns to the reader; unset or {} is none; a bad
// pattern or more than five filters fails the cold start with an error
// naming the variable, the filter and the problem.
func TestReaderFromEnv_FilterCriteriaIsTheTriggersJSONCheckedAtColdStart(t *testing.T) {
	base := map[string]string{"SHARDLOOP_LEASE_TABLE": "t", "SHARDLOOP_TARGET_FUNCTION": "f"}
	with := func(v string) map[string]string {
		env := map[string]string{"SHARDLOOP_FILTER_CRITERIA": v}
		for k, bv := range base {
			env[k] = bv
		}
		return env
	}
	for _, v := range []string{"", "{}", `{"Filters": []}`} {
		r, err := lambdaenv.ReaderFromEnv(getenv(with(v)))
		if err != nil || len(r.ReaderPolicy().FilterCriteria) != 0 {
			t.Errorf("SHARDLOOP_FILTER_CRITERIA=%q: %v, %v; want no filters", v, r.Filters, err)
		}
	}
	r, err := lambdaenv.ReaderFromEnv(getenv(with(`{"Filters": [{"Pattern": "{\"data\": {\"type\": [\"buy\"]}}"}, {"Pattern": "{\"partitionKey\": [{\"prefix\": \"audit-\"}]}"}]}`)))
	if want := []string{`{"data": {"type": ["buy"]}}`, `{"partitionKey": [{"prefix": "audit-"}]}`}; err != nil || !slices.Equal(r.ReaderPolicy().FilterCriteria, want) {
		t.Fatalf("two filters: %q, %v; want %q", r.Filters, err, want)
	}
	six := `{"Filters": [` + strings.Repeat(`{"Pattern": "{\"data\": {\"a\": [1]}}"},`, 5) + `{"Pattern": "{\"data\": {\"a\": [1]}}"}]}`
	for v, wants := range map[string][]string{
		`{"Filters": [{"Pattern": "{\"data\": {\"type\": [\"buy\"]}}"}, {"Pattern": "{\"data\": {\"n\": [{\"numeric\": [\">\"]}]}}"}]}`: {"filter 2", "data.n[0].numeric"},
		six:                             {"6 filters", "at most 5"},
		`{"Filters": [{"Pattern": 1}]}`: {"FilterCriteria"},
		`[{"Pattern": "{}"}]`:           {"FilterCriteria"},
		`{"Filters": [{"Pattern": "{\"data\": {\"a\": [{\"wildcard\": \"x*\"}]}}"}]}`: {"filter 1", "wildcard"},
	} {
		_, err := lambdaenv.ReaderFromEnv(getenv(with(v)))
		if !errors.Is(err, lambdaenv.ErrEnv) || !strings.Contains(err.Error(), "SHARDLOOP_FILTER_CRITERIA=") {
			t.Errorf("%s: err = %v, want one naming SHARDLOOP_FILTER_CRITERIA", v, err)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", v, err, w)
			}
		}
	}
	if lambdaenv.MaxFilters != 5 {
		t.Errorf("MaxFilters %d, want Lambda's default of 5", lambdaenv.MaxFilters)
	}
	if err := lambdaenv.CheckFilters([]string{`{"data": {"type": ["buy"]}}`, `{"data": x}`}); err == nil || !strings.HasPrefix(err.Error(), "filter 2:") {
		t.Errorf("CheckFilters = %v, want an error starting with the filter", err)
	}
}
