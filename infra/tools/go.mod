// This folder holds npm tools only (package.json). This file makes it a
// module of its own so that the infra module's ./... skips node_modules,
// which ships Go templates that do not compile.
module github.com/shardloop/shardloop/infra/tools

go 1.26.6
