package shards_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go/middleware"

	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/shards"
)

func TestServerTime_SetByAFakeIsRead(t *testing.T) {
	var md middleware.Metadata
	if _, ok := shards.ServerTime(md); ok {
		t.Fatal("empty metadata has a server time")
	}
	at := time.UnixMilli(1_800_000_000_123)
	shards.SetServerTime(&md, at)
	if got, ok := shards.ServerTime(md); !ok || !got.Equal(at) {
		t.Fatalf("ServerTime = %v, %v; want %v", got, ok, at)
	}
}

func TestServerTime_FromTheEmulatorsDateHeader(t *testing.T) {
	k := testaws.Kinesis(t)
	name := testaws.Name(t)
	if _, err := shards.CreateIfMissing(t.Context(), k, name, 1); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Truncate(time.Second)
	out, err := k.ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := shards.ServerTime(out.ResultMetadata)
	if !ok {
		t.Fatal("no server time from a real response")
	}
	if d := got.Sub(before); d < 0 || d > 5*time.Second {
		t.Fatalf("server time %v is %v from the local clock", got, d)
	}
}

func TestTipPinnedAt_OneSecondEarlierToTheMillisecond(t *testing.T) {
	for _, tc := range []struct{ now, want time.Time }{
		{time.UnixMilli(1_800_000_000_000), time.UnixMilli(1_799_999_999_000)},
		{time.UnixMilli(1_800_000_000_123).Add(456 * time.Microsecond), time.UnixMilli(1_799_999_999_123)},
	} {
		if got := shards.TipPinnedAt(tc.now); !got.Equal(tc.want) {
			t.Errorf("TipPinnedAt(%s) = %s, want %s", tc.now, got, tc.want)
		}
	}
}
