package shardloop

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/jsii-runtime-go"
)

// metric is one of the functions' EMF metrics for this consumer's stream.
func (c *Consumer) metric(name, statistic string, minutes float64) awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String(MetricNamespace),
		MetricName:    jsii.String(name),
		DimensionsMap: &map[string]*string{StreamDimension: c.StreamDimensionValue},
		Statistic:     jsii.String(statistic),
		Period:        awscdk.Duration_Minutes(jsii.Number(minutes)),
	})
}

// observe adds the alarms and the dashboard.
func (c *Consumer) observe(p *ConsumerProps, base string) {
	alarm := func(name, description string, m awscloudwatch.IMetric, threshold, periods float64) {
		c.Alarms[name] = awscloudwatch.NewAlarm(c.Construct, jsii.String(name+"Alarm"), &awscloudwatch.AlarmProps{
			AlarmDescription:   jsii.String(description),
			Metric:             m,
			Threshold:          jsii.Number(threshold),
			EvaluationPeriods:  jsii.Number(periods),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
	}
	alarm("TargetErrors", "shardloop: the target function failed batches (they are retried; see the shardreader's logs)",
		c.metric("TargetErrors", "Sum", 5), 1, 1)
	alarm("GivenUpBatches", "shardloop: batches were given up after repeated target failures",
		c.metric("GivenUpBatches", "Sum", 5), 1, 1)
	// The lag alarm reads the stream's MillisBehindLatest, whose Maximum is
	// the most-behind shard's: it is published whether or not the per-shard
	// metric is (PerShardLagMetric).
	alarm("Lag", "shardloop: a shard's reader is behind the tip of the stream (MillisBehindLatest, the stream's most-behind shard) for 5 minutes",
		c.metric("MillisBehindLatest", "Maximum", 1), float64(p.LagAlarmThreshold.Milliseconds()), 5)
	alarm("ExecutionsFailed", "shardloop: shard loop executions failed (the coordinator restarts them once their lease expires)",
		c.StateMachine.MetricFailed(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: awscdk.Duration_Minutes(jsii.Number(5))}), 1, 1)
	alarm("CoordinatorErrors", "shardloop: the coordinator failed in 3 or more invocations within 5 minutes",
		c.Coordinator.MetricErrors(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: awscdk.Duration_Minutes(jsii.Number(5))}), 3, 1)

	graph := func(title string, left ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Left: &left, Width: jsii.Number(8), Height: jsii.Number(6),
		})
	}
	five := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Sum")}
	alarmWidgets := []awscloudwatch.IWidget{}
	for _, name := range []string{"TargetErrors", "GivenUpBatches", "Lag", "ExecutionsFailed", "CoordinatorErrors"} {
		alarmWidgets = append(alarmWidgets, awscloudwatch.NewAlarmWidget(&awscloudwatch.AlarmWidgetProps{
			Title: jsii.String(name), Alarm: c.Alarms[name], Width: jsii.Number(8), Height: jsii.Number(4),
		}))
	}
	lag := []awscloudwatch.IMetric{c.metric("MillisBehindLatest", "Maximum", 1)}
	if p.PerShardLagMetric {
		// One line per shard, from the [Stream, Shard] metrics.
		lag = append(lag, awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String(fmt.Sprintf(`SEARCH('{%s,%s,%s} MetricName="MillisBehindLatest" %s="%s"', 'Maximum', 60)`,
				MetricNamespace, StreamDimension, ShardDimension, StreamDimension, *c.StreamDimensionValue)),
			Label:  jsii.String(""),
			Period: awscdk.Duration_Minutes(jsii.Number(1)),
		}))
	}
	c.Dashboard = awscloudwatch.NewDashboard(c.Construct, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(base + "-shardloop"),
		Widgets: &[]*[]awscloudwatch.IWidget{
			{
				graph("Records delivered and batches", c.metric("RecordsDelivered", "Sum", 5), c.metric("Batches", "Sum", 5)),
				graph("Target errors and given-up batches", c.metric("TargetErrors", "Sum", 5), c.metric("GivenUpBatches", "Sum", 5)),
				graph("Lag: MillisBehindLatest (stream max, and per shard when published)", lag...),
			},
			{
				graph("Leases", c.metric("LeaseTakes", "Sum", 5), c.metric("LeaseLosses", "Sum", 5), c.metric("ShardEnds", "Sum", 5)),
				graph("Shard loop executions", c.StateMachine.MetricStarted(five), c.StateMachine.MetricSucceeded(five), c.StateMachine.MetricFailed(five)),
				graph("Function errors", c.Coordinator.MetricErrors(five), c.ShardReader.MetricErrors(five), c.ShardReader.MetricThrottles(five)),
			},
			{
				graph("Stream: GetRecords iterator age (all consumers, max)", c.Stream.MetricGetRecordsIteratorAgeMilliseconds(&awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: awscdk.Duration_Minutes(jsii.Number(1))})),
				graph("Function duration (max)",
					c.Coordinator.MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: awscdk.Duration_Minutes(jsii.Number(5))}),
					c.ShardReader.MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: awscdk.Duration_Minutes(jsii.Number(5))})),
			},
			&alarmWidgets,
		},
	})
	c.observeEventCounts()
}
