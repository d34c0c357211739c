package awsconf

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/shardloop/shardloop/pkg/lease"
)

// peer is a loopback HTTP/1.1 peer that reads each request whole and then
// does what answer says: nothing (a silent endpoint), reset the
// connection, or write a response.
type peer struct {
	ln       net.Listener
	requests atomic.Int32
	wg       sync.WaitGroup
	answer   func(n int32, c *net.TCPConn, br *bufio.Reader)
}

func newPeer(t *testing.T, answer func(n int32, c *net.TCPConn, br *bufio.Reader)) *peer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &peer{ln: ln, answer: answer}
	var conns sync.Map
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Store(c, true)
			p.wg.Go(func() {
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					p.answer(p.requests.Add(1), c.(*net.TCPConn), br)
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		conns.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
		p.wg.Wait()
	})
	return p
}

func (p *peer) url() string { return "http://" + p.ln.Addr().String() }

func (p *peer) config() aws.Config {
	return aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(p.url()),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
}

// silent answers nothing; it holds the connection open until the client
// gives up.
func silent(int32, *net.TCPConn, *bufio.Reader) {}

// reset drops the connection with a TCP RST once the request was read.
func reset(_ int32, c *net.TCPConn, _ *bufio.Reader) {
	_ = c.SetLinger(0)
	_ = c.Close()
}

func respond(c *net.TCPConn, status int, headers map[string]string, body string) {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nContent-Length: %d\r\nContent-Type: application/json\r\n", status, http.StatusText(status), len(body))
	for k, v := range headers {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n" + body)
	_, _ = c.Write([]byte(b.String()))
}

func invoke(ctx context.Context, c *lambda.Client) error {
	_, err := c.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("target-fn"), Payload: []byte(`{"Records":[]}`)})
	return err
}

func TestSettings_DynamoDBGivesUpInsideARenewIntervalAndKinesisInsideALease(t *testing.T) {
	if b := DynamoDB.Budget(); b >= lease.DefaultRenewInterval {
		t.Errorf("DynamoDB calls may take %s, want less than the renew interval %s", b, lease.DefaultRenewInterval)
	}
	if b := Kinesis.Budget(); b >= lease.DefaultDuration {
		t.Errorf("Kinesis calls may take %s, want less than the lease %s", b, lease.DefaultDuration)
	}
	for name, s := range map[string]Settings{"Kinesis": Kinesis, "GetRecords": GetRecords, "DynamoDB": DynamoDB, "StepFunctions": StepFunctions,
		"Lambda": Lambda, "Destinations": Destinations, "STS": STS, "Other": Other, "Target": Target(0)} {
		if s.AttemptTimeout <= 0 || s.MaxAttempts < 1 || s.MaxAttempts > 3 || s.MaxBackoff <= 0 {
			t.Errorf("%s = %+v: want a positive attempt timeout and backoff, 1 to 3 attempts", name, s)
		}
	}
}

func TestTarget_AttemptOutlastsTheTargetsOwnTimeout(t *testing.T) {
	for _, c := range []struct{ timeout, want time.Duration }{
		{0, MaxTargetTimeout + TargetTimeoutMargin},
		{time.Minute, time.Minute + TargetTimeoutMargin},
		{time.Hour, MaxTargetTimeout + TargetTimeoutMargin}, // Lambda allows no more than 15 min
	} {
		if got := Target(c.timeout).AttemptTimeout; got != c.want {
			t.Errorf("Target(%s).AttemptTimeout = %s, want %s", c.timeout, got, c.want)
		}
	}
}

// A DynamoDB endpoint that accepts connections and never answers fails the
// call after DynamoDB.MaxAttempts attempts, with an error that names the
// operation, the endpoint and the bound, and not the caller's context.
func TestNewDynamoDB_SilentEndpointFailsAfterBoundedAttemptsNamingOperationAndEndpoint(t *testing.T) {
	p := newPeer(t, silent)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := NewDynamoDB(p.config()).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("leases")})
	if ctx.Err() != nil {
		t.Fatalf("the call outlived the test's own minute: %v", err)
	}
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v, want a *TimeoutError", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Error("a timed-out attempt matches context.DeadlineExceeded; callers would take it for their own deadline")
	}
	for _, want := range []string{"DynamoDB", "DescribeTable", p.url(), DynamoDB.AttemptTimeout.String()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if got := p.requests.Load(); got != int32(DynamoDB.MaxAttempts) {
		t.Errorf("the endpoint got %d requests, want %d attempts", got, DynamoDB.MaxAttempts)
	}
}

// The SDK's own Lambda client sends an Invoke again after a connection
// reset: the function may then run twice, overlapping. The target client
// does not.
func TestNewTargetLambda_DoesNotInvokeAgainAfterAConnectionReset(t *testing.T) {
	sdk := newPeer(t, reset)
	if err := invoke(t.Context(), lambda.NewFromConfig(sdk.config())); err == nil {
		t.Fatal("invoke through a reset connection succeeded")
	}
	if n := sdk.requests.Load(); n < 2 {
		t.Fatalf("control: the SDK's default client sent %d invokes, expected it to retry", n)
	}

	ours := newPeer(t, reset)
	err := invoke(t.Context(), NewTargetLambda(ours.config(), time.Minute))
	if err == nil {
		t.Fatal("invoke through a reset connection succeeded")
	}
	if n := ours.requests.Load(); n != 1 {
		t.Fatalf("the target client sent %d invokes after a connection reset, want 1: %v", n, err)
	}
}

func TestNewTargetLambda_DoesNotInvokeAgainAfterAnAttemptTimeout(t *testing.T) {
	p := newPeer(t, silent)
	s := Settings{AttemptTimeout: 300 * time.Millisecond, MaxAttempts: TargetMaxAttempts, MaxBackoff: 10 * time.Millisecond}
	err := invoke(t.Context(), newTargetLambda(p.config(), s))
	var te *TimeoutError
	if !errors.As(err, &te) || te.Operation != "Invoke" {
		t.Fatalf("err = %v, want a *TimeoutError of Invoke", err)
	}
	if n := p.requests.Load(); n != 1 {
		t.Fatalf("the target client sent %d invokes after an attempt timeout, want 1", n)
	}
}

func TestNewTargetLambda_InvokesAgainAfterAThrottle(t *testing.T) {
	p := newPeer(t, func(n int32, c *net.TCPConn, _ *bufio.Reader) {
		if n == 1 {
			respond(c, 429, map[string]string{"X-Amzn-ErrorType": "TooManyRequestsException"},
				`{"Type":"User","message":"Rate Exceeded.","Reason":"ReservedFunctionConcurrentInvocationLimitExceeded"}`)
			return
		}
		respond(c, 200, map[string]string{"X-Amz-Executed-Version": "$LATEST"}, `{}`)
	})
	if err := invoke(t.Context(), NewTargetLambda(p.config(), time.Minute)); err != nil {
		t.Fatalf("invoke after a throttle: %v", err)
	}
	if n := p.requests.Load(); n != 2 {
		t.Fatalf("the target client sent %d invokes, want 2 (the throttled one, then one that ran)", n)
	}
}

func TestInvokeRetryable_OnlyWhatProvesTheFunctionDidNotRun(t *testing.T) {
	send := func(err error) error { return &smithyhttp.RequestSendError{Err: err} }
	for _, c := range []struct {
		name string
		err  error
		want aws.Ternary
	}{
		{"throttled, modeled", &types.TooManyRequestsException{Message: aws.String("Rate Exceeded.")}, aws.TrueTernary},
		{"throttled, HTTP 429", &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 429}}, Err: errors.New("throttled")}, aws.TrueTernary},
		{"connection refused", send(&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}), aws.TrueTernary},
		{"name lookup failed for now", send(&net.DNSError{Err: "server misbehaving", Name: "lambda.example", IsTemporary: true}), aws.TrueTernary},
		{"name does not exist", send(&net.DNSError{Err: "no such host", Name: "lambda.example", IsNotFound: true}), aws.FalseTernary},
		{"connection reset after writing", send(&net.OpError{Op: "read", Net: "tcp", Err: errors.New("read: connection reset by peer")}), aws.FalseTernary},
		{"connection closed", send(io.ErrUnexpectedEOF), aws.FalseTernary},
		{"attempt timeout", &TimeoutError{Service: "Lambda", Operation: "Invoke", retryable: true}, aws.FalseTernary},
		{"service error 500", &types.ServiceException{Message: aws.String("internal")}, aws.FalseTernary},
		{"HTTP 502", &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 502}}, Err: errors.New("bad gateway")}, aws.FalseTernary},
		{"canceled", &smithy.CanceledError{Err: context.Canceled}, aws.FalseTernary},
	} {
		if got := InvokeRetryable(c.err); got != c.want {
			t.Errorf("%s: InvokeRetryable = %v, want %v", c.name, got, c.want)
		}
	}
}

// GetRecords's attempt has room for the largest answer, 10 MB of records,
// at GetRecordsMinRate.
func TestGetRecords_AnAttemptFitsATenMegabyteAnswer(t *testing.T) {
	const largest = 10 << 20
	if need := time.Duration(float64(largest) / GetRecordsMinRate * float64(time.Second)); GetRecords.AttemptTimeout < need {
		t.Errorf("GetRecords.AttemptTimeout = %s, want at least %s: a 10 MB answer at %d bytes a second", GetRecords.AttemptTimeout, need, GetRecordsMinRate)
	}
	if GetRecords.AttemptTimeout <= Kinesis.AttemptTimeout {
		t.Errorf("GetRecords.AttemptTimeout = %s, want more than the other Kinesis calls' %s", GetRecords.AttemptTimeout, Kinesis.AttemptTimeout)
	}
}

// A GetRecords attempt that times out is not sent again as it was: the
// reader asks again for fewer records. Other Kinesis calls are sent again.
func TestNewKinesis_DoesNotSendAGetRecordsThatTimedOutAgain(t *testing.T) {
	short := Settings{AttemptTimeout: 200 * time.Millisecond, MaxAttempts: 2, MaxBackoff: 10 * time.Millisecond}
	p := newPeer(t, silent)
	kc := newKinesis(p.config(), short, short)
	_, err := kc.GetRecords(t.Context(), &kinesis.GetRecordsInput{ShardIterator: aws.String("it"), Limit: aws.Int32(10000)})
	var te *TimeoutError
	if !errors.As(err, &te) || te.Operation != "GetRecords" {
		t.Fatalf("err = %v, want a *TimeoutError of GetRecords", err)
	}
	if n := p.requests.Load(); n != 1 {
		t.Fatalf("GetRecords was sent %d times after its attempt timed out, want once", n)
	}
	q := newPeer(t, silent)
	if _, err := newKinesis(q.config(), short, short).ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String("s")}); !errors.As(err, &te) {
		t.Fatalf("ListShards: err = %v, want a *TimeoutError", err)
	}
	if n := q.requests.Load(); n != int32(short.MaxAttempts) {
		t.Fatalf("ListShards was sent %d times, want %d attempts", n, short.MaxAttempts)
	}
}
