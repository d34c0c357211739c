// Module goaws pins the SQS/SNS emulator the reader's on-failure destination
// tests run against (internal/emulators.StartGoAWS builds it with
// `go build -C tools/goaws`). It is its own module so that the emulator's
// dependencies (aws-sdk-go v1, gorilla/mux, ...) stay out of the root module.
module github.com/shardloop/shardloop/tools/goaws

go 1.26.6

tool github.com/Admiral-Piett/goaws/app/cmd

require (
	github.com/Admiral-Piett/goaws v0.4.5 // indirect
	github.com/ghodss/yaml v1.0.0 // indirect
	github.com/gorilla/mux v1.8.0 // indirect
	github.com/sirupsen/logrus v1.9.0 // indirect
	golang.org/x/sys v0.5.0 // indirect
	gopkg.in/yaml.v2 v2.4.0 // indirect
)
