package filter

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/shardloop/shardloop/internal/quiet"
)

// benchFilters are five filters of the kind a mapping carries: exact
// values, a numeric range with anything-but, ignore-case and prefix inside
// an array of objects, $or with a suffix, and metadata with exists.
var benchFilters = []string{
	`{"data": {"eventType": ["order.cancelled"], "customer": {"tier": ["gold", "platinum"]}}}`,
	`{"data": {"amount": [{"numeric": [">=", 1000, "<", 5000]}], "currency": [{"anything-but": ["USD"]}]}}`,
	`{"data": {"shipping": {"country": [{"equals-ignore-case": "jp"}]}, "items": {"sku": [{"prefix": "SKU-9"}]}}}`,
	`{"data": {"$or": [{"tags": ["fraud-review"]}, {"customer": {"email": [{"suffix": "@example.invalid"}]}}]}}`,
	`{"partitionKey": [{"prefix": "vip-"}], "data": {"refund": [{"exists": true}]}}`,
}

// benchRecords makes n order events of about 1 KB each, of which about a
// quarter pass (a record that passes none costs the most: every filter is
// tried).
func benchRecords(n int) []Record {
	rng := rand.New(rand.NewPCG(1, 2))
	types := []string{"order.created", "order.paid", "order.shipped", "order.cancelled"}
	tiers := []string{"bronze", "silver", "gold"}
	currencies := []string{"EUR", "USD", "GBP", "JPY"}
	countries := []string{"DE", "FR", "US", "jp", "GB"}
	recs := make([]Record, n)
	for i := range recs {
		var items []string
		for j := 0; j < 3+rng.IntN(3); j++ {
			items = append(items, fmt.Sprintf(`{"sku": "SKU-%d", "qty": %d, "price": %.2f, "name": "Item number %d"}`, rng.IntN(1000), 1+rng.IntN(5), rng.Float64()*200, j))
		}
		doc := fmt.Sprintf(`{"eventType": %q, "orderId": "o-%08d", "customer": {"id": "c-%d", "tier": %q, "email": "user%d@example.com", "since": "2021-03-04"},`+
			` "amount": %.2f, "currency": %q, "items": [%s], "shipping": {"country": %q, "city": "Some City", "street": "Long Street Name %d", "zip": "%05d"},`+
			` "tags": ["web", "promo-%d"], "createdAt": "2026-11-30T12:%02d:%02dZ", "notes": "`,
			types[rng.IntN(len(types))], i, rng.IntN(100000), tiers[rng.IntN(len(tiers))], i,
			rng.Float64()*1200, currencies[rng.IntN(len(currencies))], strings.Join(items, ", "), countries[rng.IntN(len(countries))], rng.IntN(200), rng.IntN(99999),
			rng.IntN(10), rng.IntN(60), rng.IntN(60))
		if pad := 1020 - len(doc); pad > 0 {
			doc += strings.Repeat("x", pad)
		}
		doc += `"}`
		recs[i] = Record{
			Data:                        []byte(doc),
			PartitionKey:                fmt.Sprintf("customer-%d", rng.IntN(1000)),
			SequenceNumber:              fmt.Sprintf("4959033827149025660855969253836157109592157598913658%04d", i%10000),
			ApproximateArrivalTimestamp: time.UnixMilli(1_795_000_000_000 + int64(i)),
		}
	}
	return recs
}

// BenchmarkFilter prints `bench filter_records_per_second <n> records/s`:
// one goroutine matching 1 KB JSON records against five filters, and how
// that compares with only validating the same records with encoding/json
// (json.Valid), measured alternately in the same run.
func BenchmarkFilter(b *testing.B) {
	guard := quiet.Begin(b, "filter_records_per_second", "filter_cost_vs_json_valid_ratio")
	const (
		distinct = 2000
		rounds   = 150 // 300,000 records per measurement
	)
	recs := benchRecords(distinct)
	size := 0
	for _, r := range recs {
		size += len(r.Data)
	}
	s, err := Compile(benchFilters)
	if err != nil {
		b.Fatal(err)
	}
	var rate, ratio, passed float64
	for b.Loop() {
		var tMatch, tValid time.Duration
		pass := 0
		for round := 0; round < rounds; round++ {
			t0 := time.Now()
			for _, r := range recs {
				if s.Match(r) {
					pass++
				}
			}
			t1 := time.Now()
			for _, r := range recs {
				if !json.Valid(r.Data) {
					b.Fatal("bench record is not JSON")
				}
			}
			tMatch += t1.Sub(t0)
			tValid += time.Since(t1)
		}
		n := float64(rounds * distinct)
		rate = n / tMatch.Seconds()
		ratio = tMatch.Seconds() / tValid.Seconds()
		passed = float64(pass) / n
	}
	guard.Check(b)
	b.ReportMetric(rate, "records/s")
	fmt.Printf("bench filter_records_per_second %.0f records/s (5 filters, %d-byte JSON records on average, %.1f%% pass)\n", rate, size/distinct, 100*passed)
	fmt.Printf("bench filter_cost_vs_json_valid_ratio %.2f x (time to match a record over time for json.Valid on it)\n", ratio)
}

func TestMatch_AllocatesNothingOnceWarm(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	s, err := Compile(benchFilters)
	if err != nil {
		t.Fatal(err)
	}
	recs := benchRecords(50)
	for _, r := range recs {
		s.Match(r)
	}
	i := 0
	allocs := testing.AllocsPerRun(500, func() {
		s.Match(recs[i%len(recs)])
		i++
	})
	if allocs != 0 {
		t.Errorf("Match allocates %.2f times per record", allocs)
	}
}

func TestBenchRecords_PassAsTheFiltersSay(t *testing.T) {
	s, err := Compile(benchFilters)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range benchRecords(300) {
		var v struct {
			EventType string
			Customer  struct{ Tier, Email string }
			Amount    float64
			Currency  string
			Shipping  struct{ Country string }
			Items     []struct{ Sku string }
			Tags      []string
			Refund    *json.RawMessage
		}
		if err := json.Unmarshal(r.Data, &v); err != nil {
			t.Fatal(err)
		}
		sku9 := false
		for _, it := range v.Items {
			sku9 = sku9 || strings.HasPrefix(it.Sku, "SKU-9")
		}
		fraud := false
		for _, tag := range v.Tags {
			fraud = fraud || tag == "fraud-review"
		}
		want := (v.EventType == "order.cancelled" && (v.Customer.Tier == "gold" || v.Customer.Tier == "platinum")) ||
			(v.Amount >= 1000 && v.Amount < 5000 && v.Currency != "USD") ||
			(strings.EqualFold(v.Shipping.Country, "jp") && sku9) ||
			fraud || strings.HasSuffix(v.Customer.Email, "@example.invalid") ||
			(strings.HasPrefix(r.PartitionKey, "vip-") && v.Refund != nil)
		if got := s.Match(r); got != want {
			t.Fatalf("record %s: match = %v, want %v", r.Data, got, want)
		}
	}
}
