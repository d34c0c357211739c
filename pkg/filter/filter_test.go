package filter

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The pages the cases come from.
const (
	docLambda     = "https://docs.aws.amazon.com/lambda/latest/dg/invocation-eventfiltering.html"
	docKinesis    = "https://docs.aws.amazon.com/lambda/latest/dg/with-kinesis-filtering.html"
	docStreams    = "https://docs.aws.amazon.com/lambda/latest/dg/with-ddb-filtering.html" // the stream sources' JSON table, shared with Kinesis
	docEBOps      = "https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern-operators.html"
	docEBPatterns = "https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns.html"
	docEBArrays   = "https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-arrays.html"
	docEBNull     = "https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-null-values.html"
	docRuler      = "https://github.com/aws/event-ruler#readme" // the engine behind EventBridge patterns
)

// rec builds a record with the metadata of the Kinesis example in Lambda's
// documentation and the given data.
func rec(data string) Record {
	return Record{
		Data:                        []byte(data),
		PartitionKey:                "1",
		SequenceNumber:              "49590338271490256608559692538361571095921575989136588898",
		ApproximateArrivalTimestamp: time.UnixMilli(1545084650987),
	}
}

type matchCase struct {
	name    string
	doc     string
	pattern string
	data    string
	want    bool
}

// The operators' table of Lambda's page, each example as a data pattern,
// with a record that matches and one that does not.
var lambdaTableCases = []matchCase{
	{"null matches null", docLambda, `{"data": {"UserID": [null]}}`, `{"UserID": null}`, true},
	{"null does not match empty string", docLambda, `{"data": {"UserID": [null]}}`, `{"UserID": ""}`, false},
	{"null does not match a missing field", docLambda, `{"data": {"UserID": [null]}}`, `{"Other": 1}`, false},
	{"empty matches empty string", docLambda, `{"data": {"LastName": [""]}}`, `{"LastName": ""}`, true},
	{"empty does not match null", docLambda, `{"data": {"LastName": [""]}}`, `{"LastName": null}`, false},
	{"equals", docLambda, `{"data": {"Name": ["Alice"]}}`, `{"Name": "Alice"}`, true},
	{"equals is case sensitive", docLambda, `{"data": {"Name": ["Alice"]}}`, `{"Name": "alice"}`, false},
	{"equals ignore case", docLambda, `{"data": {"Name": [{"equals-ignore-case": "alice"}]}}`, `{"Name": "ALICE"}`, true},
	{"equals ignore case other name", docLambda, `{"data": {"Name": [{"equals-ignore-case": "alice"}]}}`, `{"Name": "Alicia"}`, false},
	{"and both", docLambda, `{"data": {"Location": ["New York"], "Day": ["Monday"]}}`, `{"Location": "New York", "Day": "Monday"}`, true},
	{"and one missing", docLambda, `{"data": {"Location": ["New York"], "Day": ["Monday"]}}`, `{"Location": "New York", "Day": "Tuesday"}`, false},
	{"or values first", docLambda, `{"data": {"PaymentType": ["Credit", "Debit"]}}`, `{"PaymentType": "Credit"}`, true},
	{"or values second", docLambda, `{"data": {"PaymentType": ["Credit", "Debit"]}}`, `{"PaymentType": "Debit"}`, true},
	{"or values neither", docLambda, `{"data": {"PaymentType": ["Credit", "Debit"]}}`, `{"PaymentType": "Cash"}`, false},
	{"or fields first", docLambda, `{"data": {"$or": [{"Location": ["New York"]}, {"Day": ["Monday"]}]}}`, `{"Location": "New York", "Day": "Friday"}`, true},
	{"or fields second", docLambda, `{"data": {"$or": [{"Location": ["New York"]}, {"Day": ["Monday"]}]}}`, `{"Location": "Boston", "Day": "Monday"}`, true},
	{"or fields neither", docLambda, `{"data": {"$or": [{"Location": ["New York"]}, {"Day": ["Monday"]}]}}`, `{"Location": "Boston", "Day": "Friday"}`, false},
	{"not", docLambda, `{"data": {"Weather": [{"anything-but": ["Raining"]}]}}`, `{"Weather": "Sunny"}`, true},
	{"not the excluded value", docLambda, `{"data": {"Weather": [{"anything-but": ["Raining"]}]}}`, `{"Weather": "Raining"}`, false},
	{"not needs the field", docLambda, `{"data": {"Weather": [{"anything-but": ["Raining"]}]}}`, `{"Sky": "Grey"}`, false},
	{"numeric equals", docLambda, `{"data": {"Price": [{"numeric": ["=", 100]}]}}`, `{"Price": 100}`, true},
	{"numeric equals any spelling", docLambda, `{"data": {"Price": [{"numeric": ["=", 100]}]}}`, `{"Price": 1.0e2}`, true},
	{"numeric equals other", docLambda, `{"data": {"Price": [{"numeric": ["=", 100]}]}}`, `{"Price": 100.5}`, false},
	{"numeric range inside", docLambda, `{"data": {"Price": [{"numeric": [">", 10, "<=", 20]}]}}`, `{"Price": 15}`, true},
	{"numeric range upper bound included", docLambda, `{"data": {"Price": [{"numeric": [">", 10, "<=", 20]}]}}`, `{"Price": 20}`, true},
	{"numeric range lower bound excluded", docLambda, `{"data": {"Price": [{"numeric": [">", 10, "<=", 20]}]}}`, `{"Price": 10}`, false},
	{"numeric range above", docLambda, `{"data": {"Price": [{"numeric": [">", 10, "<=", 20]}]}}`, `{"Price": 20.5}`, false},
	{"exists", docLambda, `{"data": {"ProductName": [{"exists": true}]}}`, `{"ProductName": "Widget"}`, true},
	{"exists missing", docLambda, `{"data": {"ProductName": [{"exists": true}]}}`, `{"Product": "Widget"}`, false},
	{"does not exist", docLambda, `{"data": {"ProductName": [{"exists": false}]}}`, `{"Product": "Widget"}`, true},
	{"does not exist present", docLambda, `{"data": {"ProductName": [{"exists": false}]}}`, `{"ProductName": "Widget"}`, false},
	{"exists false or a value: absent", docEBOps, `{"data": {"a": ["x", {"exists": false}]}}`, `{"b": 1}`, true},
	{"exists false or a value: the value", docEBOps, `{"data": {"a": ["x", {"exists": false}]}}`, `{"a": "x"}`, true},
	{"exists false or a value: another value", docEBOps, `{"data": {"a": ["x", {"exists": false}]}}`, `{"a": "y"}`, false},
	{"begins with", docLambda, `{"data": {"Region": [{"prefix": "us-"}]}}`, `{"Region": "us-east-2"}`, true},
	{"begins with other", docLambda, `{"data": {"Region": [{"prefix": "us-"}]}}`, `{"Region": "eu-west-1"}`, false},
	{"ends with", docLambda, `{"data": {"FileName": [{"suffix": ".png"}]}}`, `{"FileName": "cat.png"}`, true},
	{"ends with other", docLambda, `{"data": {"FileName": [{"suffix": ".png"}]}}`, `{"FileName": "cat.jpg"}`, false},
	// "For numbers, Lambda also uses string representation. For example,
	// 300, 300.0, and 3.0e2 are not considered equal."
	{"number equals by its text", docLambda, `{"data": {"n": [300]}}`, `{"n": 300}`, true},
	{"300 is not 300.0", docLambda, `{"data": {"n": [300]}}`, `{"n": 300.0}`, false},
	{"300 is not 3.0e2", docLambda, `{"data": {"n": [300]}}`, `{"n": 3.0e2}`, false},
	{"number is not its string", docLambda, `{"data": {"n": [300]}}`, `{"n": "300"}`, false},
	// "the Exists operator only works on leaf nodes ... wouldn't find a
	// match because "address" is an intermediate node."
	{"exists on an intermediate node", docLambda, `{"data": {"person": {"address": [{"exists": true}]}}}`,
		`{"person": {"name": "John Doe", "age": 30, "address": {"street": "123 Main St", "city": "Anytown", "country": "USA"}}}`, false},
	// The multi-level example, with Kinesis's data key.
	{"multi-level", docLambda, `{"data": {"Keys": {"Number": {"N": ["4567"]}}}}`, `{"Keys": {"ID": {"S": "ABCD"}, "Number": {"N": "4567"}}}`, true},
	{"multi-level other", docLambda, `{"data": {"Keys": {"Number": {"N": ["4567"]}}}}`, `{"Keys": {"ID": {"S": "ABCD"}, "Number": {"N": "1234"}}}`, false},
	// The console example, under data.
	{"console example 1", docLambda, `{"data": {"Metadata": [1, 2]}}`, `{"Metadata": 1}`, true},
	{"console example 3", docLambda, `{"data": {"Metadata": [1, 2]}}`, `{"Metadata": 3}`, false},
}

// The Kinesis page's example and its record.
var kinesisCases = []matchCase{
	{"order type buy", docKinesis, `{"data": {"order": {"type": ["buy"]}}}`, `{"record": 12345, "order": {"type": "buy", "stock": "ANYCO", "quantity": 1000}}`, true},
	{"order type sell", docKinesis, `{"data": {"order": {"type": ["buy"]}}}`, `{"record": 12345, "order": {"type": "sell", "stock": "ANYCO", "quantity": 1000}}`, false},
	// Lambda's earlier filtering example: a metadata field and a data field.
	{"partition key and location", docLambda, `{"partitionKey": ["1"], "data": {"Location": ["Los Angeles"]}}`, `{"Location": "Los Angeles"}`, true},
	{"partition key and other location", docLambda, `{"partitionKey": ["1"], "data": {"Location": ["Los Angeles"]}}`, `{"Location": "Seattle"}`, false},
	{"other partition key", docLambda, `{"partitionKey": ["2"], "data": {"Location": ["Los Angeles"]}}`, `{"Location": "Los Angeles"}`, false},
	{"temperature range", docLambda, `{"data": {"Temperature": [{"numeric": [">", 50, "<=", 60]}]}}`, `{"City": "Seattle", "Temperature": 55}`, true},
	// The documentation's record carries "Temperature": "46", a string:
	// numeric matching works only on JSON numbers.
	{"numeric does not match a string", docEBOps, `{"data": {"Temperature": [{"numeric": [">", 40]}]}}`, `{"City": "Seattle", "Temperature": "46"}`, false},
}

// EventBridge's pages and Event Ruler's README: the rules Lambda's syntax
// is defined by.
var eventBridgeCases = []matchCase{
	{"prefix on time", docEBOps, `{"data": {"time": [{"prefix": "2017-10-02"}]}}`, `{"time": "2017-10-02T18:43:48Z"}`, true},
	{"prefix ignore case", docEBOps, `{"data": {"service": [{"prefix": {"equals-ignore-case": "eventb"}}]}}`, `{"service": "EventBridge"}`, true},
	{"prefix ignore case other", docEBOps, `{"data": {"service": [{"prefix": {"equals-ignore-case": "eventb"}}]}}`, `{"service": "Lambda"}`, false},
	{"suffix ignore case", docEBOps, `{"data": {"service": [{"suffix": {"equals-ignore-case": "tBridge"}}]}}`, `{"service": "EVENTBRIDGE"}`, true},
	{"suffix ignore case other", docEBOps, `{"data": {"service": [{"suffix": {"equals-ignore-case": "tBridge"}}]}}`, `{"service": "EventBus"}`, false},
	{"prefix is for strings", docRuler, `{"data": {"n": [{"prefix": "12"}]}}`, `{"n": 123}`, false},
	{"anything-but string", docEBOps, `{"data": {"state": [{"anything-but": "initializing"}]}}`, `{"state": "running"}`, true},
	{"anything-but string excluded", docEBOps, `{"data": {"state": [{"anything-but": "initializing"}]}}`, `{"state": "initializing"}`, false},
	{"anything-but number", docEBOps, `{"data": {"x-limit": [{"anything-but": 123}]}}`, `{"x-limit": 124}`, true},
	{"anything-but number excluded", docEBOps, `{"data": {"x-limit": [{"anything-but": 123}]}}`, `{"x-limit": 123}`, false},
	{"anything-but strings", docEBOps, `{"data": {"state": [{"anything-but": ["stopped", "overloaded"]}]}}`, `{"state": "running"}`, true},
	{"anything-but strings excluded", docEBOps, `{"data": {"state": [{"anything-but": ["stopped", "overloaded"]}]}}`, `{"state": "overloaded"}`, false},
	{"anything-but numbers", docEBOps, `{"data": {"x-limit": [{"anything-but": [100, 200, 300]}]}}`, `{"x-limit": 150}`, true},
	{"anything-but numbers excluded", docEBOps, `{"data": {"x-limit": [{"anything-but": [100, 200, 300]}]}}`, `{"x-limit": 200}`, false},
	{"numeric all fields", docEBOps, `{"data": {"c-count": [{"numeric": [">", 0, "<=", 5]}], "d-count": [{"numeric": ["<", 10]}], "x-limit": [{"numeric": ["=", 3.018e2]}]}}`,
		`{"c-count": 5, "d-count": 3, "x-limit": 301.8}`, true},
	{"numeric one field fails", docEBOps, `{"data": {"c-count": [{"numeric": [">", 0, "<=", 5]}], "d-count": [{"numeric": ["<", 10]}], "x-limit": [{"numeric": ["=", 3.018e2]}]}}`,
		`{"c-count": 5, "d-count": 10, "x-limit": 301.8}`, false},
	{"numeric six decimals", docRuler, `{"data": {"v": [{"numeric": ["=", 0.1]}]}}`, `{"v": 0.1000000001}`, true},
	{"numeric out of range", docRuler, `{"data": {"v": [{"numeric": [">", 0]}]}}`, `{"v": 6e9}`, false},
	{"exists false on missing leaf", docEBOps, `{"data": {"detail": {"c-count": [{"exists": false}]}}}`, `{"detail": {"state": ["initializing", "running"]}}`, true},
	{"exists false on intermediate node", docEBOps, `{"data": {"detail": {"c-count": [{"exists": false}]}}}`, `{"detail": {"state": ["initializing", "running"], "c-count": {"c1": 100}}}`, true},
	{"exists false on missing parent", docRuler, `{"data": {"detail": {"c-count": [{"exists": false}]}}}`, `{"other": 1}`, true},
	{"exists true on null", docRuler, `{"data": {"v": [{"exists": true}]}}`, `{"v": null}`, true},
	{"complex", docEBOps, `{"data": {"time": [{"prefix": "2017-10-02"}], "detail": {"state": [{"anything-but": "initializing"}], "c-count": [{"numeric": [">", 0, "<=", 5]}], "d-count": [{"numeric": ["<", 10]}], "x-limit": [{"anything-but": [100, 200, 300]}]}}}`,
		`{"time": "2017-10-02T16:24:49Z", "detail": {"c-count": 5, "d-count": 3, "x-limit": 301.8, "state": "running"}}`, true},
	{"complex state excluded", docEBOps, `{"data": {"time": [{"prefix": "2017-10-02"}], "detail": {"state": [{"anything-but": "initializing"}], "c-count": [{"numeric": [">", 0, "<=", 5]}], "d-count": [{"numeric": ["<", 10]}], "x-limit": [{"anything-but": [100, 200, 300]}]}}}`,
		`{"time": "2017-10-02T16:24:49Z", "detail": {"c-count": 5, "d-count": 3, "x-limit": 301.8, "state": "initializing"}}`, false},
	{"risk score and trigger risk", docEBPatterns, `{"data": {"detail": {"risk-score": [80], "trigger": {"risk": [8]}}}}`, `{"detail": {"risk-score": 80, "trigger": {"alert-type": "basic", "risk": 8}}}`, true},
	{"response elements null", docEBPatterns, `{"data": {"detail": {"responseElements": [null]}}}`, `{"detail": {"eventVersion": "", "responseElements": null}}`, true},
	{"event version empty", docEBNull, `{"data": {"detail": {"eventVersion": [""]}}}`, `{"detail": {"eventVersion": "", "responseElements": null}}`, true},
	{"empty string does not match null", docEBNull, `{"data": {"detail": {"responseElements": [""]}}}`, `{"detail": {"eventVersion": "", "responseElements": null}}`, false},
	{"array intersection", docEBArrays, `{"data": {"resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-b188560f", "arn:aws:ec2:us-east-1:111122223333:instance/i-b188560f"]}}`,
		`{"resources": ["arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:eb56d16b:autoScalingGroupName/ASGTerminate", "arn:aws:ec2:us-east-1:123456789012:instance/i-b188560f"]}`, true},
	{"array no intersection", docEBArrays, `{"data": {"resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-b188560f"]}}`, `{"resources": ["a", "b"]}`, false},
	{"empty array has no value", docRuler, `{"data": {"resources": [{"exists": true}]}}`, `{"resources": []}`, false},
	{"empty array is absent", docRuler, `{"data": {"resources": [{"exists": false}]}}`, `{"resources": []}`, true},
	{"objects in an array", docRuler, `{"data": {"employees": {"firstName": ["Anna"]}}}`,
		`{"employees": [{"firstName": "John", "lastName": "Doe"}, {"firstName": "Anna", "lastName": "Smith"}, {"firstName": "Peter", "lastName": "Jones"}]}`, true},
	{"nested arrays", docRuler, `{"data": {"employees": {"firstName": ["Peter"]}}}`,
		`{"employees": [[{"firstName": "John", "lastName": "Doe"}, {"firstName": "Anna", "lastName": "Smith"}], [{"firstName": "Peter", "lastName": "Jones"}]]}`, true},
	{"fields from one array element", docRuler, `{"data": {"employees": {"firstName": ["Anna"], "lastName": ["Jones"]}}}`,
		`{"employees": [{"firstName": "John", "lastName": "Doe"}, {"firstName": "Anna", "lastName": "Smith"}, {"firstName": "Peter", "lastName": "Jones"}]}`, false},
	{"fields from one array element match", docRuler, `{"data": {"employees": {"firstName": ["Anna"], "lastName": ["Smith"]}}}`,
		`{"employees": [{"firstName": "John", "lastName": "Doe"}, {"firstName": "Anna", "lastName": "Smith"}]}`, true},
	{"or normal", docRuler, `{"data": {"source": ["aws.cloudwatch"], "$or": [{"metricName": ["CPUUtilization", "ReadLatency"]}, {"namespace": ["AWS/EC2", "AWS/ES"]}]}}`,
		`{"source": "aws.cloudwatch", "namespace": "AWS/EC2"}`, true},
	{"or normal no branch", docRuler, `{"data": {"source": ["aws.cloudwatch"], "$or": [{"metricName": ["CPUUtilization", "ReadLatency"]}, {"namespace": ["AWS/EC2", "AWS/ES"]}]}}`,
		`{"source": "aws.cloudwatch", "namespace": "AWS/S3"}`, false},
	{"or parallel", docRuler, `{"data": {"$or": [{"metricName": ["CPUUtilization"]}, {"namespace": ["AWS/EC2"]}], "detail": {"$or": [{"source": ["aws.cloudwatch"]}, {"detail-type": ["CloudWatch Alarm State Change"]}]}}}`,
		`{"metricName": "CPUUtilization", "detail": {"detail-type": "CloudWatch Alarm State Change"}}`, true},
	{"or parallel second fails", docRuler, `{"data": {"$or": [{"metricName": ["CPUUtilization"]}, {"namespace": ["AWS/EC2"]}], "detail": {"$or": [{"source": ["aws.cloudwatch"]}, {"detail-type": ["CloudWatch Alarm State Change"]}]}}}`,
		`{"metricName": "CPUUtilization", "detail": {"detail-type": "other"}}`, false},
	{"or with and inside", docRuler, `{"data": {"source": ["aws.cloudwatch"], "$or": [{"metricName": ["CPUUtilization"]}, {"metricType": ["MetricType"], "namespace": ["AWS/EC2"]}, {"scope": ["Service"]}]}}`,
		`{"source": "aws.cloudwatch", "metricType": "MetricType", "namespace": "AWS/EC2"}`, true},
	{"or with and inside half", docRuler, `{"data": {"source": ["aws.cloudwatch"], "$or": [{"metricName": ["CPUUtilization"]}, {"metricType": ["MetricType"], "namespace": ["AWS/EC2"]}, {"scope": ["Service"]}]}}`,
		`{"source": "aws.cloudwatch", "metricType": "MetricType", "namespace": "AWS/ES"}`, false},
	{"or nested", docRuler, `{"data": {"source": ["aws.cloudwatch"], "$or": [{"metricName": ["CPUUtilization"]}, {"metricType": ["MetricType"], "namespace": ["AWS/EC2", "AWS/ES"], "$or": [{"metricId": [1234]}, {"spaceId": [1000]}]}, {"scope": ["Service"]}]}}`,
		`{"source": "aws.cloudwatch", "metricType": "MetricType", "namespace": "AWS/ES", "spaceId": 1000}`, true},
	{"or nested inner fails", docRuler, `{"data": {"source": ["aws.cloudwatch"], "$or": [{"metricName": ["CPUUtilization"]}, {"metricType": ["MetricType"], "namespace": ["AWS/EC2", "AWS/ES"], "$or": [{"metricId": [1234]}, {"spaceId": [1000]}]}, {"scope": ["Service"]}]}}`,
		`{"source": "aws.cloudwatch", "metricType": "MetricType", "namespace": "AWS/ES", "spaceId": 1001}`, false},
	{"or at the top level across data and metadata", docLambda, `{"$or": [{"partitionKey": ["9"]}, {"data": {"type": ["buy"]}}]}`, `{"type": "buy"}`, true},
	{"ignore case is Unicode", docRuler, `{"data": {"city": [{"equals-ignore-case": "münchen"}]}}`, `{"city": "MÜNCHEN"}`, true},
	{"escaped strings", docRuler, `{"data": {"s": ["a\"b\\c\u00e9"]}}`, `{"s": "a\"b\\c\u00e9"}`, true},
	{"escaped keys", docRuler, `{"data": {"ké": [1]}}`, `{"k\u00e9": 1}`, true},
}

// Matching on the record's metadata, as the fields of Lambda's "kinesis"
// object.
var metadataCases = []matchCase{
	{"partition key prefix", docLambda, `{"partitionKey": [{"prefix": "1"}]}`, `not json`, true},
	{"sequence number", docLambda, `{"sequenceNumber": ["49590338271490256608559692538361571095921575989136588898"]}`, `{}`, true},
	{"arrival as seconds", docKinesis, `{"approximateArrivalTimestamp": [1545084650.987]}`, `{}`, true},
	{"arrival range", docKinesis, `{"approximateArrivalTimestamp": [{"numeric": [">=", 1545084650, "<", 1545084651]}]}`, `{}`, true},
	{"arrival range before", docKinesis, `{"approximateArrivalTimestamp": [{"numeric": ["<", 1545084650]}]}`, `{}`, false},
	{"schema version", docKinesis, `{"kinesisSchemaVersion": ["1.0"]}`, `{}`, true},
}

func runMatchCases(t *testing.T, cases []matchCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Compile([]string{tc.pattern})
			if err != nil {
				t.Fatalf("Compile(%s): %v (%s)", tc.pattern, err, tc.doc)
			}
			if got := s.Match(rec(tc.data)); got != tc.want {
				t.Errorf("pattern %s\nrecord data %s\nmatch = %v, want %v (%s)", tc.pattern, tc.data, got, tc.want, tc.doc)
			}
		})
	}
}

func TestMatch_LambdaOperatorTable(t *testing.T)       { runMatchCases(t, lambdaTableCases) }
func TestMatch_KinesisExamples(t *testing.T)           { runMatchCases(t, kinesisCases) }
func TestMatch_EventBridgeRules(t *testing.T)          { runMatchCases(t, eventBridgeCases) }
func TestMatch_MetadataFieldsOfTheRecord(t *testing.T) { runMatchCases(t, metadataCases) }

// The stream sources' table of JSON and non-JSON data ("Lambda drops the
// record" when the data is not JSON and the pattern names data; "Lambda
// filters (on the other metadata properties only)" when it names none).
func TestMatch_DataThatIsNotJSON(t *testing.T) {
	notJSON := []string{"plain text", "", "{\"a\": 1", "{\"a\": 1} trailing", "\xff\xfe", "{'a': 1}", "[1,]", "01", "{\"a\":\"\x01\"}", "NaN"}
	dataFilter := `{"data": {"a": [{"exists": false}]}}` // would match any JSON object without a
	metaFilter := `{"partitionKey": ["1"]}`
	for _, d := range notJSON {
		s, err := Compile([]string{dataFilter})
		if err != nil {
			t.Fatal(err)
		}
		if s.Match(rec(d)) {
			t.Errorf("data %q is not JSON: a data filter matched it (%s)", d, docStreams)
		}
		s, err = Compile([]string{metaFilter})
		if err != nil {
			t.Fatal(err)
		}
		if !s.Match(rec(d)) {
			t.Errorf("data %q: a metadata-only filter did not match on metadata (%s)", d, docStreams)
		}
		s, err = Compile([]string{dataFilter, metaFilter})
		if err != nil {
			t.Fatal(err)
		}
		if !s.Match(rec(d)) {
			t.Errorf("data %q: the metadata-only filter of two did not pass the record", d)
		}
		s, err = Compile([]string{`{"partitionKey": ["1"], "data": {"a": [{"exists": false}]}}`})
		if err != nil {
			t.Fatal(err)
		}
		if s.Match(rec(d)) {
			t.Errorf("data %q: a filter naming metadata and data matched data that is not JSON", d)
		}
	}
	// Valid JSON that is not an object has none of the fields.
	s, err := Compile([]string{dataFilter})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{`123`, `"text"`, `null`, ` [ ] `, `true`} {
		if !s.Match(rec(d)) {
			t.Errorf("data %s is JSON without field a: {\"exists\": false} did not match", d)
		}
	}
}

// Data that is a JSON array at the top is matched as an array field is
// (docs/filtering.md): the pattern's fields match when any element has them,
// all of one pattern's fields within one element, arrays in arrays too; an
// element that is not an object has none of the fields.
func TestMatch_ATopLevelArrayIsMatchedLikeAnArrayField(t *testing.T) {
	for _, c := range []struct {
		pattern, data string
		want          bool
	}{
		{`{"data": {"type": ["buy"]}}`, `[{"type": "buy"}, {"type": "sell"}]`, true},
		{`{"data": {"type": ["buy"]}}`, `[{"type": "sell"}]`, false},
		{`{"data": {"type": ["buy"]}}`, `[[{"type": "buy"}]]`, true},
		{`{"data": {"type": ["buy"]}}`, `["buy"]`, false},
		{`{"data": {"a": ["1"], "b": ["2"]}}`, `[{"a": "1"}, {"b": "2"}]`, false},
		{`{"data": {"a": ["1"], "b": ["2"]}}`, `[{"a": "1", "b": "2"}]`, true},
		{`{"data": {"type": [{"exists": false}]}}`, `[{"type": "sell"}]`, false},
		{`{"data": {"type": [{"exists": false}]}}`, `[]`, true},
		{`{"data": {"type": [{"exists": false}]}}`, `["buy", 5]`, true},
	} {
		s, err := Compile([]string{c.pattern})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Match(rec(c.data)); got != c.want {
			t.Errorf("pattern %s, data %s: match = %v, want %v", c.pattern, c.data, got, c.want)
		}
	}
}

func TestMatch_FiltersAreORed(t *testing.T) {
	s, err := Compile([]string{
		`{"data": {"type": ["buy"]}}`,
		`{"data": {"type": ["sell"], "quantity": [{"numeric": [">", 100]}]}}`,
		`{"partitionKey": ["vip"]}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pk, data string
		want     bool
	}{
		{"1", `{"type": "buy"}`, true},
		{"1", `{"type": "sell", "quantity": 101}`, true},
		{"1", `{"type": "sell", "quantity": 100}`, false},
		{"vip", `{"type": "hold"}`, true},
		{"vip", `not json`, true},
		{"1", `not json`, false},
	} {
		r := rec(tc.data)
		r.PartitionKey = tc.pk
		if got := s.Match(r); got != tc.want {
			t.Errorf("partitionKey %s data %s: match = %v, want %v", tc.pk, tc.data, got, tc.want)
		}
	}
}

func TestMatch_NoFiltersPassesEverything(t *testing.T) {
	for _, s := range []*Set{nil, {}} {
		if !s.Match(rec("not json")) {
			t.Error("an empty Set refused a record")
		}
	}
	s, err := Compile(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Match(rec("x")) || s.Len() != 0 || s.NeedsData() {
		t.Error("Compile(nil) does not pass everything")
	}
	s, err = ParseCriteria([]byte(`{}`))
	if err != nil || !s.Match(rec("x")) {
		t.Errorf("ParseCriteria({}) = %v, %v; want a Set passing everything", s, err)
	}
}

func TestMatch_WithoutArrivalTimeTheFieldIsAbsent(t *testing.T) {
	s, err := Compile([]string{`{"approximateArrivalTimestamp": [{"exists": false}]}`})
	if err != nil {
		t.Fatal(err)
	}
	r := rec("{}")
	if s.Match(r) {
		t.Error("matched exists:false on a record with an arrival time")
	}
	r.ApproximateArrivalTimestamp = time.Time{}
	if !s.Match(r) {
		t.Error("a record without an arrival time has the field")
	}
}

func TestParseCriteria_ReadsTheAPIShape(t *testing.T) {
	s, err := ParseCriteria([]byte(`{"Filters": [{"Pattern": "{\"data\": {\"a\": [1]}}"}, {"Pattern": "{\"partitionKey\": [\"k\"]}"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 2 || !s.Match(rec(`{"a": 1}`)) || s.Match(rec(`{"a": 2}`)) {
		t.Errorf("criteria compiled wrong: %v", s.Patterns())
	}
	// The CLI's lower-case keys.
	if _, err := ParseCriteria([]byte(`{"filters": [{"pattern": "{\"data\": {\"a\": [\"1\", \"2\"]}}"}]}`)); err != nil {
		t.Errorf("lower-case keys: %v", err)
	}
	for _, bad := range []string{`{"Filters": [{"Pattern": "{\"a\": [1]}"}]}`, `{"Filter": []}`, `[]`, `{"Filters": [{}]}`, `{} {}`} {
		_, err := ParseCriteria([]byte(bad))
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseCriteria(%s) = %v, want ErrInvalid", bad, err)
		}
	}
}

// Each refused pattern, with where the error points and what it says.
func TestCompile_RefusesBadPatternsNamingFilterAndPlace(t *testing.T) {
	long := `{"data": {"a": ["` + strings.Repeat("x", MaxPatternLength) + `"]}}`
	cases := []struct {
		name    string
		pattern string
		path    string
		problem string
	}{
		{"empty string", ``, "", "the pattern is empty"},
		{"not JSON", `{"data": `, "", "not valid JSON"},
		{"trailing text", `{"data": {"a": [1]}} x`, "", "not valid JSON"},
		{"not an object", `["a"]`, "", "a pattern is a JSON object"},
		{"empty object", `{}`, "", "names no field"},
		{"too long", long, "", "characters long"},
		{"unknown top-level field", `{"eventSource": ["aws:kinesis"]}`, "eventSource", "is none of them"},
		{"data field at the top", `{"order": {"type": ["buy"]}}`, "order", "data fields go inside"},
		{"data as a list of rules", `{"data": ["x"]}`, "data", "must be a JSON object"},
		{"metadata as an object", `{"partitionKey": {"a": ["x"]}}`, "partitionKey", "give it a list of rules"},
		{"empty data object", `{"data": {}}`, "data", "an empty object"},
		{"scalar field value", `{"data": {"a": "x"}}`, "data.a", "a field takes a list of rules"},
		{"empty rule list", `{"data": {"a": []}}`, "data.a", "the list of rules is empty"},
		{"list as a rule", `{"data": {"a": [["x"]]}}`, "data.a[0]", "a rule is a value"},
		{"two operators", `{"data": {"a": [{"prefix": "x", "suffix": "y"}]}}`, "data.a[0]", "exactly one operator"},
		{"no operator", `{"data": {"a": [{}]}}`, "data.a[0]", "exactly one operator"},
		{"unknown operator", `{"data": {"a": [{"contains": "x"}]}}`, "data.a[0].contains", "unknown operator"},
		{"wildcard", `{"data": {"a": [{"wildcard": "*.png"}]}}`, "data.a[0].wildcard", "Lambda event filtering does not support"},
		{"cidr", `{"data": {"ip": [{"cidr": "10.0.0.0/24"}]}}`, "data.ip[0].cidr", "does not support"},
		{"anything-but prefix", `{"data": {"a": [{"anything-but": {"prefix": "us-"}}]}}`, "data.a[0].anything-but.prefix", "does not support"},
		{"anything-but suffix", `{"data": {"a": [{"anything-but": {"suffix": ".png"}}]}}`, "data.a[0].anything-but.suffix", "does not support"},
		{"anything-but ignore case", `{"data": {"a": [{"anything-but": {"equals-ignore-case": "x"}}]}}`, "data.a[0].anything-but.equals-ignore-case", "does not support"},
		{"anything-but wildcard", `{"data": {"a": [{"anything-but": {"wildcard": "*/lib/*"}}]}}`, "data.a[0].anything-but.wildcard", "does not support"},
		{"anything-but mixed", `{"data": {"a": [{"anything-but": ["x", 1]}]}}`, "data.a[0].anything-but", "not both"},
		{"anything-but empty", `{"data": {"a": [{"anything-but": []}]}}`, "data.a[0].anything-but", "non-empty list"},
		{"anything-but null", `{"data": {"a": [{"anything-but": [null]}]}}`, "data.a[0].anything-but[0]", "strings or numbers"},
		{"prefix number", `{"data": {"a": [{"prefix": 1}]}}`, "data.a[0].prefix", "takes a string"},
		{"prefix bad object", `{"data": {"a": [{"prefix": {"suffix": "x"}}]}}`, "data.a[0].prefix", "equals-ignore-case"},
		{"ignore case number", `{"data": {"a": [{"equals-ignore-case": 1}]}}`, "data.a[0].equals-ignore-case", "takes a string"},
		{"exists string", `{"data": {"a": [{"exists": "yes"}]}}`, "data.a[0].exists", "true or false"},
		{"numeric odd", `{"data": {"amount": [{"numeric": [">", 0, "<"]}]}}`, "data.amount[0].numeric", "one or two operator and value pairs"},
		{"numeric not a list", `{"data": {"amount": [{"numeric": 5}]}}`, "data.amount[0].numeric", "not a list"},
		{"numeric bad operator", `{"data": {"amount": [{"numeric": ["!=", 0]}]}}`, "data.amount[0].numeric[0]", "unknown numeric operator"},
		{"numeric string value", `{"data": {"amount": [{"numeric": [">", "0"]}]}}`, "data.amount[0].numeric[1]", "expected a number"},
		{"numeric operator not a string", `{"data": {"amount": [{"numeric": [0, ">"]}]}}`, "data.amount[0].numeric[0]", "expected an operator"},
		{"numeric out of range", `{"data": {"amount": [{"numeric": [">", 6e9]}]}}`, "data.amount[0].numeric[1]", "out of range"},
		{"numeric equals in a range", `{"data": {"amount": [{"numeric": ["=", 1, "<", 5]}]}}`, "data.amount[0].numeric[0]", "stands alone"},
		{"numeric two lower bounds", `{"data": {"amount": [{"numeric": [">", 1, ">=", 5]}]}}`, "data.amount[0].numeric[2]", "two lower bounds"},
		{"numeric two upper bounds", `{"data": {"amount": [{"numeric": ["<", 1, "<=", 5]}]}}`, "data.amount[0].numeric[2]", "two upper bounds"},
		{"numeric empty range", `{"data": {"amount": [{"numeric": [">", 5, "<", 5]}]}}`, "data.amount[0].numeric", "the range is empty"},
		{"numeric inverted range", `{"data": {"amount": [{"numeric": ["<", 1, ">", 5]}]}}`, "data.amount[0].numeric", "the range is empty"},
		{"or not a list", `{"data": {"$or": {"a": [1]}}}`, "data.$or", "at least two patterns"},
		{"or one branch", `{"data": {"$or": [{"a": [1]}]}}`, "data.$or", "at least two patterns"},
		{"or branch not an object", `{"data": {"$or": [{"a": [1]}, ["b"]]}}`, "data.$or[1]", "a $or branch is an object"},
		{"or empty branch", `{"data": {"$or": [{"a": [1]}, {}]}}`, "data.$or[1]", "empty $or branch"},
		{"or top-level unknown field", `{"$or": [{"partitionKey": ["1"]}, {"order": ["x"]}]}`, "$or[1].order", "is none of them"},
		{"error deep inside", `{"data": {"order": {"items": {"sku": [{"prefix": 5}]}}}}`, "data.order.items.sku[0].prefix", "takes a string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile([]string{`{"data": {"ok": [1]}}`, tc.pattern})
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Compile(%s) = %v, want ErrInvalid", tc.pattern, err)
			}
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *filter.Error", err)
			}
			if fe.Index != 1 || fe.Path != tc.path || !strings.Contains(fe.Problem, tc.problem) {
				t.Errorf("got Index %d Path %q Problem %q; want Index 1 Path %q and a problem containing %q", fe.Index, fe.Path, fe.Problem, tc.path, tc.problem)
			}
			if !strings.HasPrefix(err.Error(), "filter 2: ") {
				t.Errorf("message %q does not name filter 2", err)
			}
		})
	}
}

func TestCompile_ErrorMessageReadsAsASentence(t *testing.T) {
	_, err := Compile([]string{`{"data": {"amount": [{"numeric": [">", 0, "<"]}]}}`})
	want := `filter 1: at data.amount[0].numeric: numeric takes one or two operator and value pairs, such as [">", 0, "<=", 5]; got 3 elements`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

func TestCompile_RefusesMoreThanTenFilters(t *testing.T) {
	p := make([]string, MaxFilters+1)
	for i := range p {
		p[i] = `{"partitionKey": ["1"]}`
	}
	_, err := Compile(p)
	var fe *Error
	if !errors.As(err, &fe) || fe.Index != -1 || !strings.HasPrefix(err.Error(), "filter criteria: 11 filters") {
		t.Fatalf("11 filters: %v", err)
	}
	if _, err := Compile(p[:MaxFilters]); err != nil {
		t.Fatalf("10 filters (Lambda's raised quota): %v", err)
	}
}

func TestCompile_PatternOfExactlyMaxLengthIsAccepted(t *testing.T) {
	head, tail := `{"data": {"a": ["`, `"]}}`
	p := head + strings.Repeat("é", MaxPatternLength-len(head)-len(tail)) + tail // characters, not bytes
	if _, err := Compile([]string{p}); err != nil {
		t.Fatalf("a pattern of %d characters: %v", MaxPatternLength, err)
	}
}

func TestMatch_IsSafeForConcurrentUse(t *testing.T) {
	s, err := Compile([]string{`{"data": {"n": [{"numeric": [">", 50]}]}}`})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan bool)
	for g := 0; g < 4; g++ {
		go func() {
			ok := true
			for i := 0; i < 2000; i++ {
				big := i%2 == 0
				d := `{"n": 10, "pad": "` + strings.Repeat("y", i%50) + `"}`
				if big {
					d = `{"pad": "` + strings.Repeat("\\u00e9", i%50) + `", "n": 99}`
				}
				if s.Match(rec(d)) != big {
					ok = false
				}
			}
			done <- ok
		}()
	}
	for g := 0; g < 4; g++ {
		if !<-done {
			t.Error("a concurrent Match gave a wrong answer")
		}
	}
}
