package shardloop

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/jsii-runtime-go"

	"github.com/shardloop/shardloop/pkg/metrics"
)

// DroppedAlarm is the key in Consumer.Alarms of the alarm on
// DroppedEventCount: records given up with no on-failure destination.
const DroppedAlarm = "DroppedEventCount"

// observeEventCounts adds the trigger's event counts to the dashboard (a
// row of their own) and an alarm on dropped records.
func (c *Consumer) observeEventCounts() {
	c.Alarms[DroppedAlarm] = awscloudwatch.NewAlarm(c.Construct, jsii.String("DroppedEventCountAlarm"), &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String("shardloop: records were dropped: given up under the failure policy (MaxRetryAttempts, MaxRecordAge) " +
			"with no on-failure destination; the shardreader's error logs name them"),
		Metric:             c.metric(metrics.DroppedEventCount, "Sum", 5),
		Threshold:          jsii.Number(1),
		EvaluationPeriods:  jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
	graph := func(title string, left ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Left: &left, Width: jsii.Number(8), Height: jsii.Number(6),
		})
	}
	sum := func(name string) awscloudwatch.IMetric { return c.metric(name, "Sum", 5) }
	c.Dashboard.AddWidgets(
		graph("Events: polled, filtered out, invoked (the trigger's counts)",
			sum(metrics.PolledEventCount), sum(metrics.FilteredOutEventCount), sum(metrics.InvokedEventCount)),
		graph("Events: failed invokes, dropped, sent to the on-failure destination",
			sum(metrics.FailedInvokeEventCount), sum(metrics.DroppedEventCount), sum(metrics.OnFailureDestinationDeliveredEventCount)),
		graph("IteratorAge: age of a batch's last record when sent (max)", c.metric(metrics.IteratorAge, "Maximum", 1)),
	)
	c.Dashboard.AddWidgets(awscloudwatch.NewAlarmWidget(&awscloudwatch.AlarmWidgetProps{
		Title: jsii.String(DroppedAlarm), Alarm: c.Alarms[DroppedAlarm], Width: jsii.Number(8), Height: jsii.Number(4),
	}))
}
