package shardloop

import (
	"encoding/json"
	"fmt"

	"github.com/shardloop/shardloop/internal/lambdaenv"
)

// checkFilters checks Filters as the shardreader will at its cold start;
// it returns what is wrong, or "".
func (p *ConsumerProps) checkFilters() string {
	for i, f := range p.Filters {
		if isToken(f) {
			return fmt.Sprintf("filter %d is a token: give each pattern as a literal, so that it is checked at synth", i+1)
		}
	}
	if err := lambdaenv.CheckFilters(p.Filters); err != nil {
		return err.Error()
	}
	return ""
}

// filterCriteria is the shardreader's SHARDLOOP_FILTER_CRITERIA: the
// patterns as a FilterCriteria, in the JSON of Lambda's API.
func filterCriteria(patterns []string) string {
	type f struct {
		Pattern string `json:"Pattern"`
	}
	fc := struct {
		Filters []f `json:"Filters"`
	}{}
	for _, p := range patterns {
		fc.Filters = append(fc.Filters, f{p})
	}
	b, _ := json.Marshal(fc) // strings only: cannot fail
	return string(b)
}
