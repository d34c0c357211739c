// Module gofakes3 pins the S3 emulator the reader's S3 on-failure
// destination tests run against (internal/emulators.StartGoFakeS3 builds it
// with `go build -C tools/gofakes3`). It is its own module so that the
// emulator's dependencies stay out of the root module.
module github.com/shardloop/shardloop/tools/gofakes3

go 1.26.6

tool github.com/johannesboyne/gofakes3/cmd/gofakes3

require (
	github.com/johannesboyne/gofakes3 v1.2.0 // indirect
	github.com/ryszard/goskiplist v0.0.0-20150312221310-2dfbae5fcf46 // indirect
	github.com/spf13/afero v1.2.1 // indirect
	go.etcd.io/bbolt v1.3.5 // indirect
	go.shabbyrobe.org/gocovmerge v0.0.0-20230507111327-fa4f82cfbf4d // indirect
	golang.org/x/sys v0.7.0 // indirect
	golang.org/x/text v0.9.0 // indirect
	golang.org/x/tools v0.8.0 // indirect
	gopkg.in/mgo.v2 v2.0.0-20180705113604-9856a29383ce // indirect
)
