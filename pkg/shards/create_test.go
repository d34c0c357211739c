package shards

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// fakeCreate is a CreateAPI made of two functions.
type fakeCreate struct {
	describe func(*kinesis.DescribeStreamSummaryInput) (*kinesis.DescribeStreamSummaryOutput, error)
	create   func(*kinesis.CreateStreamInput) (*kinesis.CreateStreamOutput, error)
}

func (f fakeCreate) DescribeStreamSummary(_ context.Context, in *kinesis.DescribeStreamSummaryInput, _ ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	return f.describe(in)
}

func (f fakeCreate) CreateStream(_ context.Context, in *kinesis.CreateStreamInput, _ ...func(*kinesis.Options)) (*kinesis.CreateStreamOutput, error) {
	return f.create(in)
}

func status(s types.StreamStatus) (*kinesis.DescribeStreamSummaryOutput, error) {
	return &kinesis.DescribeStreamSummaryOutput{StreamDescriptionSummary: &types.StreamDescriptionSummary{StreamStatus: s}}, nil
}

func notFound() (*kinesis.DescribeStreamSummaryOutput, error) {
	return nil, &types.ResourceNotFoundException{Message: aws.String("no such stream")}
}

func noCreate(t *testing.T) func(*kinesis.CreateStreamInput) (*kinesis.CreateStreamOutput, error) {
	return func(*kinesis.CreateStreamInput) (*kinesis.CreateStreamOutput, error) {
		t.Error("CreateStream called")
		return nil, errors.New("unexpected")
	}
}

func quick(o *CreateOptions) { o.Timeout, o.PollInterval = 2*time.Second, time.Millisecond }

func TestCreateIfMissing_CreatesProvisionedThenWaits(t *testing.T) {
	var calls atomic.Int32
	var sent *kinesis.CreateStreamInput
	api := fakeCreate{
		describe: func(*kinesis.DescribeStreamSummaryInput) (*kinesis.DescribeStreamSummaryOutput, error) {
			switch calls.Add(1) {
			case 1, 2: // missing, then not yet visible after the create
				return notFound()
			case 3:
				return status(types.StreamStatusCreating)
			}
			return status(types.StreamStatusActive)
		},
		create: func(in *kinesis.CreateStreamInput) (*kinesis.CreateStreamOutput, error) {
			sent = in
			return &kinesis.CreateStreamOutput{}, nil
		},
	}
	created, err := CreateIfMissing(t.Context(), api, "arn:aws:kinesis:eu-west-1:123456789012:stream/orders", 4, quick)
	if err != nil || !created {
		t.Fatalf("= %v, %v; want true, nil", created, err)
	}
	if sent == nil || aws.ToString(sent.StreamName) != "orders" || aws.ToInt32(sent.ShardCount) != 4 ||
		sent.StreamModeDetails == nil || sent.StreamModeDetails.StreamMode != types.StreamModeProvisioned {
		t.Errorf("CreateStream input = %+v, want orders, 4 shards, PROVISIONED", sent)
	}
	if calls.Load() != 4 {
		t.Errorf("%d status checks, want 4", calls.Load())
	}
}

func TestCreateIfMissing_DescribesByARNWhenGivenOne(t *testing.T) {
	arn := "arn:aws:kinesis:eu-west-1:123456789012:stream/orders"
	api := fakeCreate{
		describe: func(in *kinesis.DescribeStreamSummaryInput) (*kinesis.DescribeStreamSummaryOutput, error) {
			if aws.ToString(in.StreamARN) != arn || in.StreamName != nil {
				t.Errorf("describe input %+v, want StreamARN only", in)
			}
			return status(types.StreamStatusActive)
		},
		create: noCreate(t),
	}
	if created, err := CreateIfMissing(t.Context(), api, arn, 1, quick); err != nil || created {
		t.Errorf("= %v, %v; want false, nil", created, err)
	}
}

func TestCreateIfMissing_ExistingStatuses(t *testing.T) {
	for _, tc := range []struct {
		status  types.StreamStatus
		wantErr bool
	}{
		{types.StreamStatusActive, false},
		{types.StreamStatusUpdating, false}, // resharding: readable
		{types.StreamStatusDeleting, true},
	} {
		t.Run(string(tc.status), func(t *testing.T) {
			api := fakeCreate{
				describe: func(*kinesis.DescribeStreamSummaryInput) (*kinesis.DescribeStreamSummaryOutput, error) {
					return status(tc.status)
				},
				create: noCreate(t),
			}
			created, err := CreateIfMissing(t.Context(), api, "orders", 1, quick)
			if created || (err != nil) != tc.wantErr {
				t.Errorf("= %v, %v", created, err)
			}
			if tc.wantErr && (!errors.Is(err, ErrNotActive) || err.Error() != "stream orders is DELETING, not ACTIVE") {
				t.Errorf("err = %v, want ErrNotActive saying DELETING", err)
			}
		})
	}
}

func TestCreateIfMissing_ConcurrentCreatorIsWaitedFor(t *testing.T) {
	var calls atomic.Int32
	api := fakeCreate{
		describe: func(*kinesis.DescribeStreamSummaryInput) (*kinesis.DescribeStreamSummaryOutput, error) {
			if calls.Add(1) == 1 {
				return notFound()
			}
			return status(types.StreamStatusActive)
		},
		create: func(*kinesis.CreateStreamInput) (*kinesis.CreateStreamOutput, error) {
			return nil, &types.ResourceInUseException{Message: aws.String("exists")}
		},
	}
	created, err := CreateIfMissing(t.Context(), api, "orders", 1, quick)
	if err != nil || created {
		t.Errorf("= %v, %v; want false, nil (another caller created it)", created, err)
	}
}

func TestCreateIfMissing_OtherErrorsWrapped(t *testing.T) {
	boom := errors.New("access denied")
	api := fakeCreate{
		describe: func(*kinesis.DescribeStreamSummaryInput) (*kinesis.DescribeStreamSummaryOutput, error) {
			return nil, boom
		},
		create: noCreate(t),
	}
	_, err := CreateIfMissing(t.Context(), api, "orders", 1, quick)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "describe stream orders") {
		t.Errorf("err = %v", err)
	}
	api = fakeCreate{
		describe: func(*kinesis.DescribeStreamSummaryInput) (*kinesis.DescribeStreamSummaryOutput, error) {
			return notFound()
		},
		create: func(*kinesis.CreateStreamInput) (*kinesis.CreateStreamOutput, error) { return nil, boom },
	}
	created, err := CreateIfMissing(t.Context(), api, "orders", 1, quick)
	if created || !errors.Is(err, boom) || !strings.Contains(err.Error(), "create stream orders") {
		t.Errorf("= %v, %v", created, err)
	}
}

func TestCreateIfMissing_CallerCancelIsNotATimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	api := fakeCreate{
		describe: func(*kinesis.DescribeStreamSummaryInput) (*kinesis.DescribeStreamSummaryOutput, error) {
			cancel()
			return status(types.StreamStatusCreating)
		},
		create: noCreate(t),
	}
	_, err := CreateIfMissing(ctx, api, "orders", 1, quick)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrNotActive) {
		t.Errorf("err = %v, want context.Canceled and not ErrNotActive", err)
	}
}

func TestCreateIfMissing_InvalidInputRefusedBeforeAnyRequest(t *testing.T) {
	api := fakeCreate{
		describe: func(*kinesis.DescribeStreamSummaryInput) (*kinesis.DescribeStreamSummaryOutput, error) {
			t.Error("DescribeStreamSummary called")
			return notFound()
		},
		create: noCreate(t),
	}
	for _, tc := range []struct {
		stream string
		count  int
		opt    func(*CreateOptions)
		field  string
	}{
		{"bad name!", 1, nil, "stream"},
		{"orders", 0, nil, "shardCount"},
		{"orders", -3, nil, "shardCount"},
		{"orders", 1, func(o *CreateOptions) { o.Timeout = -time.Second }, "Timeout"},
		{"orders", 1, func(o *CreateOptions) { o.PollInterval = -time.Second }, "PollInterval"},
	} {
		var opts []func(*CreateOptions)
		if tc.opt != nil {
			opts = append(opts, tc.opt)
		}
		_, err := CreateIfMissing(t.Context(), api, tc.stream, tc.count, opts...)
		var ie *InvalidError
		if !errors.As(err, &ie) || ie.Field != tc.field || !errors.Is(err, ErrInvalid) {
			t.Errorf("(%q, %d): err = %v, want InvalidError for %s", tc.stream, tc.count, err, tc.field)
		}
	}
}

func TestStreamName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"orders", "orders"},
		{"Orders_2026.v1-a", "Orders_2026.v1-a"},
		{strings.Repeat("a", 128), strings.Repeat("a", 128)},
		{"arn:aws:kinesis:us-east-1:123456789012:stream/orders", "orders"},
		{"arn:aws-cn:kinesis:cn-north-1:123456789012:stream/orders", "orders"},
		{"arn:aws-us-gov:kinesis:us-gov-west-1:123456789012:stream/o.r-d_s", "o.r-d_s"},
	} {
		if got, err := StreamName(tc.in); err != nil || got != tc.want {
			t.Errorf("StreamName(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{
		"",
		strings.Repeat("a", 129),
		"orders:1",
		"my stream",
		"arn:aws:kinesis:us-east-1:123456789012:stream/",
		"arn:aws:kinesis:us-east-1:123456789012:stream/orders/consumer/c:1700000000",
		"arn:aws:kinesis:us-east-1:123456789012:orders",
		"arn:aws:dynamodb:us-east-1:123456789012:table/orders",
		"arn:aws:kinesis:us-east-1::stream/orders",
		"arn:aws:kinesis::123456789012:stream/orders",
		"arn::kinesis:us-east-1:123456789012:stream/orders",
		"arn:aws:kinesis:us-east-1",
	} {
		_, err := StreamName(in)
		var ie *InvalidError
		if !errors.As(err, &ie) || ie.Field != "stream" || ie.Value != in || !errors.Is(err, ErrInvalid) {
			t.Errorf("StreamName(%q): err = %v, want InvalidError for field stream", in, err)
		}
	}
	_, err := StreamName("arn:aws:kinesis:us-east-1:1:table/x")
	want := `shards: invalid stream "arn:aws:kinesis:us-east-1:1:table/x": want ` + wantStream
	if err == nil || err.Error() != want {
		t.Errorf("message = %v, want %s", err, want)
	}
}
