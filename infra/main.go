// Command infra is the shardloop CDK app: one stack with one consumer,
// configured from CDK context (cdk.json, or -c key=value; see
// shardloop.PropsFromContext). `make synth` and `make deploy` run it through
// the CDK CLI.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/shardloop/shardloop/infra/shardloop"
)

func main() {
	app := awscdk.NewApp(nil)
	if err := run(app); err != nil {
		fmt.Fprintln(os.Stderr, err)
		jsii.Close()
		os.Exit(1)
	}
	app.Synth(nil)
	jsii.Close()
}

func run(app awscdk.App) error {
	props, err := shardloop.PropsFromContext(app.Node())
	if err != nil {
		return err
	}
	name := "Shardloop"
	if v, ok := app.Node().TryGetContext(jsii.String(shardloop.CtxStackName)).(string); ok && v != "" {
		name = v
	}
	_, _, err = shardloop.NewStack(app, name, &shardloop.StackProps{
		StackProps: awscdk.StackProps{Env: &awscdk.Environment{
			Account: envOrNil("CDK_DEFAULT_ACCOUNT"),
			Region:  envOrNil("CDK_DEFAULT_REGION"),
		}},
		Consumer: props,
	})
	return err
}

func envOrNil(key string) *string {
	if v := os.Getenv(key); v != "" {
		return &v
	}
	return nil
}
