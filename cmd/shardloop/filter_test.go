package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/shards"
)

// run --filter is repeatable up to five times; each pattern is checked at
// startup as the shardreader checks it, and a bad one or a sixth is a usage
// error naming the flag, the filter and the problem.
func TestRunFlags_FilterRepeatableUpToFiveCheckedNamingTheFlag(t *testing.T) {
	buy, audit := `{"data": {"type": ["buy"]}}`, `{"partitionKey": [{"prefix": "audit-"}]}`
	_, ro, err := parseRunFlags([]string{"--stream", "orders", "--filter", buy, "--filter", audit})
	if err != nil || !slices.Equal(ro.FilterCriteria, []string{buy, audit}) {
		t.Fatalf("two --filter: %q, %v", ro.FilterCriteria, err)
	}
	if _, ro, err := parseRunFlags([]string{"--stream", "orders"}); err != nil || len(ro.FilterCriteria) != 0 {
		t.Fatalf("no --filter: %q, %v", ro.FilterCriteria, err)
	}
	six := []string{"--stream", "orders"}
	for range 6 {
		six = append(six, "--filter", buy)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{six, []string{"--filter", "6 filters", "at most 5"}},
		{[]string{"--stream", "orders", "--filter", buy, "--filter", `{"data": {"n": [{"numeric": ["<"]}]}}`}, []string{"--filter", "filter 2", "data.n[0].numeric"}},
		{[]string{"--stream", "orders", "--filter", `{"type": ["buy"]}`}, []string{"--filter", "filter 1", "data"}},
		{[]string{"--stream", "orders", "--filter", ""}, []string{"--filter", "filter 1", "empty"}},
	} {
		_, _, err := parseRunFlags(c.args)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: err = %v, want a usage error", c.args, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q lacks %q", c.args, err, w)
			}
		}
	}
}

// run --filter: the target gets only the records that pass, and the
// metric lines (--metrics) count the others as FilteredOutEventCount.
func TestRun_FilterDeliversOnlyMatchingRecordsAndCountsTheRest(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := testaws.Name(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := shards.CreateIfMissing(ctx, kc, stream, 1); err != nil {
		t.Fatal(err)
	}
	const n = 40
	var entries []ktypes.PutRecordsRequestEntry
	for i := range n {
		kind := map[bool]string{true: "buy", false: "sell"}[i%2 == 1] // the last is a buy
		entries = append(entries, ktypes.PutRecordsRequestEntry{PartitionKey: aws.String("k"), Data: fmt.Appendf(nil, `{"type":%q,"i":%d}`, kind, i)})
	}
	if _, err := kc.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries}); err != nil {
		t.Fatal(err)
	}
	emulatorEnv(t)
	peer := &lambdaPeer{}
	srv := httptest.NewServer(peer)
	defer srv.Close()
	t.Setenv("AWS_ENDPOINT_URL_LAMBDA", srv.URL)
	t.Setenv("AWS_ENDPOINT_URL_STS", stsPeer(t, "arn:aws:sts::000000000000:assumed-role/dev-reader/alice"))

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	var stderr string
	go func() {
		defer close(done)
		_, _, stderr = runCLI(runCtx, "run", "--stream", stream, "--target", "my-fn", "--start", "horizon", "--metrics",
			"--batch-size", "7", "--filter", `{"data": {"type": ["buy"]}}`)
	}()
	for len(peer.records()) < n/2 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	<-done
	recs := peer.records()
	if len(recs) != n/2 {
		t.Fatalf("delivered %d records, want the %d buys\n%s", len(recs), n/2, stderr)
	}
	for _, r := range recs {
		data, _ := base64.StdEncoding.DecodeString(r["kinesis"].(map[string]any)["data"].(string))
		if !strings.Contains(string(data), `"buy"`) {
			t.Errorf("delivered %s, which the filter does not pass", data)
		}
	}
	if !strings.Contains(stderr, `"FilteredOutEventCount":`) || !strings.Contains(stderr, `"InvokedEventCount":`) {
		t.Errorf("the metric lines lack the event counts:\n%s", stderr)
	}
}
