package filter_test

import (
	"errors"
	"fmt"

	"github.com/shardloop/shardloop/pkg/filter"
)

func Example() {
	// The patterns of an event source mapping's FilterCriteria.
	set, err := filter.Compile([]string{
		`{"data": {"order": {"type": ["buy"], "quantity": [{"numeric": [">=", 100]}]}}}`,
		`{"partitionKey": [{"prefix": "audit-"}]}`,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range []filter.Record{
		{PartitionKey: "k1", Data: []byte(`{"order": {"type": "buy", "quantity": 1000}}`)},
		{PartitionKey: "k2", Data: []byte(`{"order": {"type": "sell", "quantity": 1000}}`)},
		{PartitionKey: "audit-7", Data: []byte(`not JSON`)},
		{PartitionKey: "k3", Data: []byte(`not JSON`)},
	} {
		fmt.Printf("%s %s: %v\n", r.PartitionKey, r.Data, set.Match(r))
	}

	// A bad pattern is refused where it is configured.
	_, err = filter.Compile([]string{`{"data": {"amount": [{"numeric": [">", 0, "<"]}]}}`})
	fmt.Println(errors.Is(err, filter.ErrInvalid), err)
	// Output:
	// k1 {"order": {"type": "buy", "quantity": 1000}}: true
	// k2 {"order": {"type": "sell", "quantity": 1000}}: false
	// audit-7 not JSON: true
	// k3 not JSON: false
	// true filter 1: at data.amount[0].numeric: numeric takes one or two operator and value pairs, such as [">", 0, "<=", 5]; got 3 elements
}
