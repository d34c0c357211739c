package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/shardloop/shardloop/internal/handlers"
	"github.com/shardloop/shardloop/pkg/shards"
)

// kinesisEndpoint names the endpoint c sends to, for error messages.
func kinesisEndpoint(ctx context.Context, c *kinesis.Client) string {
	o := c.Options()
	ep, err := o.EndpointResolverV2.ResolveEndpoint(ctx, kinesis.EndpointParameters{Region: aws.String(o.Region), Endpoint: o.BaseEndpoint})
	if err != nil {
		return fmt.Sprintf("the Kinesis endpoint of region %q", o.Region)
	}
	return ep.URI.String()
}

// dynamoEndpoint names the endpoint c sends to, for error messages.
func dynamoEndpoint(ctx context.Context, c *dynamodb.Client) string {
	o := c.Options()
	ep, err := o.EndpointResolverV2.ResolveEndpoint(ctx, dynamodb.EndpointParameters{Region: aws.String(o.Region), Endpoint: o.BaseEndpoint})
	if err != nil {
		return fmt.Sprintf("the DynamoDB endpoint of region %q", o.Region)
	}
	return ep.URI.String()
}

// streamNotFound is --stream naming no stream at the endpoint.
func streamNotFound(ctx context.Context, kc *kinesis.Client, stream, hint string) error {
	return fmt.Errorf("--stream %s: no such stream at %s (region %s)%s", stream, kinesisEndpoint(ctx, kc), kc.Options().Region, hint)
}

// tableMissing reports whether err says the DynamoDB table does not exist.
func tableMissing(err error) bool { return errors.As(err, new(*dtypes.ResourceNotFoundException)) }

// resolveStream returns the stream's ARN. A missing stream is created with
// create shards when create is positive, else an error that names the
// stream, the endpoint and --create-shards.
func resolveStream(ctx context.Context, kc *kinesis.Client, stream string, create int, log *slog.Logger) (string, error) {
	arn, err := handlers.StreamARN(ctx, kc, stream)
	switch {
	case err == nil:
		return arn, nil
	case !handlers.StreamMissing(err):
		return "", fmt.Errorf("--stream %s: %w", stream, err)
	case create == 0:
		return "", streamNotFound(ctx, kc, stream, ": check the name, the region and the account, or pass --create-shards N to create it with N shards")
	}
	if _, err := shards.CreateIfMissing(ctx, kc, stream, create); err != nil {
		return "", fmt.Errorf("--create-shards %d: %w", create, err)
	}
	log.Info("created the stream", "stream", stream, "shards", create, "endpoint", kinesisEndpoint(ctx, kc))
	if arn, err = handlers.StreamARN(ctx, kc, stream); err != nil {
		return "", fmt.Errorf("--stream %s: %w", stream, err)
	}
	return arn, nil
}

// kinesisNow returns the time on Kinesis's clock, from the Date of its
// answer to a DescribeStreamSummary of stream, or the host's clock, with a
// warning, when there is no answer with one. A runner stamps the start it
// was given with it (a configuration's deploy time): runners on hosts whose
// clocks disagree then order their configurations by one clock.
func kinesisNow(ctx context.Context, api handlers.StreamDescriber, stream string, log *slog.Logger) time.Time {
	out, err := api.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamARN: aws.String(stream)})
	if err == nil {
		if at, ok := shards.ServerTime(out.ResultMetadata); ok {
			return at
		}
	}
	log.Warn("Kinesis's clock is unknown (no Date in its answer); this runner's start is stamped with the host's clock", "err", err)
	return time.Now()
}

// CallerIdentityAPI is the STS call invokeIdentityOf makes.
type CallerIdentityAPI interface {
	GetCallerIdentity(ctx context.Context, in *sts.GetCallerIdentityInput, optFns ...func(*sts.Options)) (*sts.GetCallerIdentityOutput, error)
}

// callerInvokeIdentity returns the invokeIdentityArn for the caller's
// identity, as Lambda's event would show the role, and logs where it comes
// from; "" with a warning when STS does not answer.
func callerInvokeIdentity(ctx context.Context, api CallerIdentityAPI, log *slog.Logger) string {
	out, err := api.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		log.Warn("no invokeIdentityArn: STS GetCallerIdentity failed, so records carry an empty one; pass --invoke-identity-arn", "err", err)
		return ""
	}
	arn, note := invokeIdentityOf(aws.ToString(out.Arn))
	log.Info("invokeIdentityArn is the caller's identity; pass --invoke-identity-arn to choose another", "invoke_identity_arn", arn, "caller", aws.ToString(out.Arn), "note", note)
	return arn
}

// invokeIdentityOf turns the caller's identity (GetCallerIdentity's Arn)
// into the ARN Lambda's Kinesis event would carry as invokeIdentityArn: an
// IAM role's ARN for an assumed role (arn:aws:sts::<account>:assumed-role/
// <role>/<session> becomes arn:aws:iam::<account>:role/<role>). STS does not
// say a role's path, so a role with one (/service-role/…) comes out
// without it; note says so. A user's or the root's ARN is kept.
func invokeIdentityOf(caller string) (arn, note string) {
	parts := strings.SplitN(caller, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" {
		return caller, "not an ARN; kept as STS gave it"
	}
	partition, service, account, resource := parts[1], parts[2], parts[4], parts[5]
	if service == "sts" && strings.HasPrefix(resource, "assumed-role/") {
		role, _, _ := strings.Cut(strings.TrimPrefix(resource, "assumed-role/"), "/")
		return fmt.Sprintf("arn:%s:iam::%s:role/%s", partition, account, role),
			"the role of the assumed-role session; STS does not give the role's path: pass --invoke-identity-arn if it has one"
	}
	return caller, ""
}
