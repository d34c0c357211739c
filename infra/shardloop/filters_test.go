package shardloop

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/shardloop/shardloop/internal/lambdaenv"
)

const (
	buyPattern   = `{"data": {"type": ["buy"]}}`
	auditPattern = `{"partitionKey": [{"prefix": "audit-"}]}`
)

// Filters reach the shardreader as SHARDLOOP_FILTER_CRITERIA, the trigger's
// FilterCriteria JSON, which the shardreader reads back to the same
// patterns; without Filters the variable is left out (the default
// environment test checks the whole of it).
func TestNewConsumer_FiltersReachTheShardReaderAsFilterCriteria(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack := newTestStack(app, "S")
	p := baseProps(t)
	p.Filters = []string{buyPattern, auditPattern}
	if _, err := NewConsumer(stack, "C", &p); err != nil {
		t.Fatal(err)
	}
	var tmpl cfn
	if err := json.Unmarshal(templateJSON(t, stack), &tmpl); err != nil {
		t.Fatal(err)
	}
	_, reader := tmpl.byPrefix(t, "AWS::Lambda::Function", "CShardReader")
	vars := reader.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
	fc, _ := vars[lambdaenv.VarFilterCriteria].(string)
	got, err := lambdaenv.ParseFilterCriteria(fc)
	if err != nil || !slices.Equal(got, p.Filters) {
		t.Fatalf("%s = %q: %q, %v; want %q", lambdaenv.VarFilterCriteria, fc, got, err, p.Filters)
	}
	if !strings.HasPrefix(fc, `{"Filters":[{"Pattern":`) {
		t.Errorf("%s = %s, want Lambda's FilterCriteria shape", lambdaenv.VarFilterCriteria, fc)
	}
	_, def := defaultTemplate(t).byPrefix(t, "AWS::Lambda::Function", "ConsumerShardReader")
	if _, set := def.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)[lambdaenv.VarFilterCriteria]; set {
		t.Errorf("%s set without Filters", lambdaenv.VarFilterCriteria)
	}
}

// A bad pattern, more than five, or a token fails synthesis with a
// ConfigError naming Filters, the filter and the problem.
func TestNewConsumer_FilterThatLambdaWouldRefuseFailsSynth(t *testing.T) {
	for _, tc := range []struct {
		name    string
		filters func(awscdk.Stack) []string
		want    []string
	}{
		{"bad numeric", func(awscdk.Stack) []string {
			return []string{buyPattern, `{"data": {"n": [{"numeric": [">", 1, "<"]}]}}`}
		}, []string{"filter 2", "data.n[0].numeric"}},
		{"wildcard", func(awscdk.Stack) []string { return []string{`{"data": {"name": [{"wildcard": "a*"}]}}`} }, []string{"filter 1", "wildcard"}},
		{"six", func(awscdk.Stack) []string { return slices.Repeat([]string{buyPattern}, MaxFilters+1) }, []string{"6 filters", "at most 5"}},
		{"token", func(s awscdk.Stack) []string {
			return []string{*awscdk.NewCfnParameter(s, jsii.String("P"), &awscdk.CfnParameterProps{Type: jsii.String("String")}).ValueAsString()}
		}, []string{"filter 1", "token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
			stack := newTestStack(app, "S")
			p := baseProps(t)
			p.Filters = tc.filters(stack)
			_, err := NewConsumer(stack, "C", &p)
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), "shardloop: Filters: ") {
				t.Fatalf("err = %v, want a ConfigError naming Filters", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}

// The context key filterCriteria (make deploy FILTER_CRITERIA=...) takes
// the trigger's FilterCriteria JSON; one that does not parse is an error
// naming the key.
func TestPropsFromContext_FilterCriteria(t *testing.T) {
	fc := `{"Filters": [{"Pattern": "{\"data\": {\"type\": [\"buy\"]}}"}]}`
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &map[string]any{CtxFilterCriteria: fc}})
	p, err := PropsFromContext(app.Node())
	if err != nil || !slices.Equal(p.Filters, []string{buyPattern}) {
		t.Fatalf("context %s: %q, %v", CtxFilterCriteria, p.Filters, err)
	}
	for _, v := range []string{"", " "} {
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &map[string]any{CtxFilterCriteria: v}})
		if p, err := PropsFromContext(app.Node()); err != nil || p.Filters != nil {
			t.Errorf("context %s=%q: %q, %v; want no filters", CtxFilterCriteria, v, p.Filters, err)
		}
	}
	bad := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &map[string]any{CtxFilterCriteria: `{"Filters": [{"Pattern": "{\"type\": 1}"}]}`}})
	if _, err := PropsFromContext(bad.Node()); err == nil || !strings.Contains(err.Error(), CtxFilterCriteria) || !strings.Contains(err.Error(), "filter 1") {
		t.Errorf("bad criteria: err = %v, want one naming %s and the filter", err, CtxFilterCriteria)
	}
}

// The dashboard graphs the trigger's event counts and IteratorAge, and the
// DroppedEventCount alarm is on it.
func TestDashboard_GraphsTheTriggersEventCountsAndIteratorAge(t *testing.T) {
	tmpl := defaultTemplate(t)
	_, dash := tmpl.byPrefix(t, "AWS::CloudWatch::Dashboard", "ConsumerDashboard")
	body := canon(t, dash.Properties["DashboardBody"])
	for _, m := range []string{"PolledEventCount", "FilteredOutEventCount", "InvokedEventCount", "FailedInvokeEventCount",
		"DroppedEventCount", "OnFailureDestinationDeliveredEventCount", "IteratorAge"} {
		if !strings.Contains(body, `\"`+m+`\"`) {
			t.Errorf("dashboard lacks %s", m)
		}
	}
	id, _ := tmpl.byPrefix(t, "AWS::CloudWatch::Alarm", "ConsumerDroppedEventCountAlarm")
	if !strings.Contains(body, id) {
		t.Errorf("dashboard has no widget of the alarm %s", id)
	}
}
