package kinesismem_test

import (
	"github.com/shardloop/shardloop/internal/faults"
	"github.com/shardloop/shardloop/internal/kinesismem"
	"github.com/shardloop/shardloop/internal/kinesismem/kinesistest"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/runner"
	"github.com/shardloop/shardloop/pkg/shards"
)

// The model is a drop-in for the consumer-side interfaces of the packages
// that call Kinesis.
var (
	_ reader.KinesisAPI      = (*kinesismem.Client)(nil)
	_ shards.ListAPI         = (*kinesismem.Client)(nil)
	_ shards.CreateAPI       = (*kinesismem.Client)(nil)
	_ coordinator.KinesisAPI = (*kinesismem.Client)(nil)
	_ runner.KinesisAPI      = (*kinesismem.Client)(nil)
	_ faults.KinesisAPI      = (*kinesismem.Client)(nil)
	_ kinesistest.API        = (*kinesismem.Client)(nil)
)
