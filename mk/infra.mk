# Deployment targets: the CDK app in infra/, the SAM template in template/.
# Included by the root Makefile; also runs alone: make -f mk/infra.mk test-infra

INFRA_ROOT   := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
GO           ?= go
INFRA_DIR    := $(INFRA_ROOT)/infra
INFRA_TOOLS  := $(INFRA_DIR)/tools
INFRA_STAMP  := $(INFRA_TOOLS)/node_modules/.installed
INFRA_OUT    := $(INFRA_ROOT)/build/infra-test
EXAMPLE_APP  := $(INFRA_ROOT)/examples/cdk-app
CDK          := $(INFRA_TOOLS)/node_modules/.bin/cdk
ASL          := $(INFRA_ROOT)/template/statemachine.asl.json
SAM_TEMPLATE := $(INFRA_ROOT)/template/template.yaml
CFN_LINT     ?= cfn-lint
SAM          ?= sam

export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true

# Settings of the consumer, passed to the CDK app as context (see
# infra/cdk.json for the defaults and docs/deploy.md for their meaning).
STREAM            ?=
CREATE_SHARDS     ?=
TARGET_ARN        ?=
START_POSITION    ?=
BATCH_SIZE        ?=
POLL_INTERVAL     ?=
RUN_LENGTH        ?=
MAX_ITERATIONS    ?=
WINDOW            ?=
LEASE_TABLE       ?=
LOG_RETENTION_DAYS ?=
MAX_RETRY_ATTEMPTS ?=
MAX_RECORD_AGE    ?=
BISECT_ON_ERROR   ?=
ON_FAILURE_DESTINATION ?=
BATCHING_WINDOW   ?=
DEAGGREGATE       ?=
PARALLELIZATION_FACTOR ?=
PER_SHARD_LAG_METRIC ?=
READ_AHEAD_MIB    ?=
TUMBLING_WINDOW_IN_SECONDS ?=
# FILTER_CRITERIA: a FilterCriteria as JSON, in single quotes on the command
# line: FILTER_CRITERIA='{"Filters":[{"Pattern":"{\"data\":{\"type\":[\"buy\"]}}"}]}'
FILTER_CRITERIA   ?=
STACK_NAME        ?=
CDK_FLAGS         ?=

ctx = $(if $(strip $(2)),-c $(1)=$(strip $(2)))
CDK_CONTEXT = $(call ctx,stream,$(STREAM)) $(call ctx,createShards,$(CREATE_SHARDS)) \
  $(call ctx,targetArn,$(TARGET_ARN)) $(call ctx,startPosition,$(START_POSITION)) \
  $(call ctx,batchSize,$(BATCH_SIZE)) $(call ctx,pollInterval,$(POLL_INTERVAL)) \
  $(call ctx,runLength,$(RUN_LENGTH)) $(call ctx,maxIterations,$(MAX_ITERATIONS)) \
  $(call ctx,window,$(WINDOW)) $(call ctx,leaseTable,$(LEASE_TABLE)) \
  $(call ctx,logRetentionDays,$(LOG_RETENTION_DAYS)) $(call ctx,stackName,$(STACK_NAME)) \
  $(call ctx,maxRetryAttempts,$(MAX_RETRY_ATTEMPTS)) $(call ctx,maxRecordAge,$(MAX_RECORD_AGE)) \
  $(call ctx,bisectOnError,$(BISECT_ON_ERROR)) $(call ctx,onFailureDestination,$(ON_FAILURE_DESTINATION)) \
  $(call ctx,batchingWindow,$(BATCHING_WINDOW)) $(call ctx,deaggregate,$(DEAGGREGATE)) \
  $(call ctx,parallelizationFactor,$(PARALLELIZATION_FACTOR)) \
  $(call ctx,perShardLagMetric,$(PER_SHARD_LAG_METRIC)) \
  $(call ctx,readAheadMiB,$(READ_AHEAD_MIB)) \
  $(call ctx,tumblingWindowInSeconds,$(TUMBLING_WINDOW_IN_SECONDS)) \
  $(if $(strip $(FILTER_CRITERIA)),-c 'filterCriteria=$(strip $(FILTER_CRITERIA))')
CDK_RUN = cd $(INFRA_DIR) && $(CDK) --no-notices $(CDK_FLAGS)

.PHONY: deps-infra test-infra synth diff deploy destroy sam-build sam-invoke sam-start-lambda sam-build-check

deps-infra: $(INFRA_STAMP) ## Install the infra npm tools (aws-cdk CLI, asl-validator) with npm ci

$(INFRA_STAMP): $(INFRA_TOOLS)/package-lock.json
	@command -v node >/dev/null || { echo "node (>= 20) is required for the CDK CLI and asl-validator"; exit 1; }
	cd $(INFRA_TOOLS) && npm ci --no-audit --no-fund
	@touch $@

# The Go tests build the functions for linux/arm64, and infra/userapp
# synthesizes examples/cdk-app as a user's app in a temporary folder (in
# parallel with the construct's tests); it lints that template with cfn-lint
# itself (CFN_LINT), or leaves it to the NOTICE below when cfn-lint is
# missing (SHARDLOOP_CFN_LINT_OPTIONAL).
test-infra: deps-infra ## Infra checks: gofmt, go vet, CDK assertion tests, the example app, asl-validator, cfn-lint on the templates
	@out=$$(cd $(INFRA_DIR) && gofmt -l main.go shardloop internal userapp ../examples/cdk-app/main.go); if [ -n "$$out" ]; then echo "gofmt would change (infra):"; echo "$$out"; exit 1; fi
	cd $(INFRA_DIR) && $(GO) vet ./...
	cd $(EXAMPLE_APP) && $(GO) vet ./...
	rm -rf $(INFRA_OUT)
	cd $(INFRA_DIR) && SHARDLOOP_SYNTH_OUT=$(INFRA_OUT) CFN_LINT=$(CFN_LINT) SHARDLOOP_CFN_LINT_OPTIONAL=1 $(GO) test -count=1 -timeout 10m ./...
	$(INFRA_TOOLS)/node_modules/.bin/asl-validator --json-path $(ASL)
	@# W3005 (a DependsOn that a GetAtt already implies) is how CDK orders a
	@# function after its role's policy; it is ignored for the CDK template only.
	@if command -v $(CFN_LINT) >/dev/null 2>&1; then \
	  echo "$(CFN_LINT) --ignore-checks W3005 -- build/infra-test/ShardloopTest.template.json" && \
	  $(CFN_LINT) --ignore-checks W3005 -- $(INFRA_OUT)/ShardloopTest.template.json && \
	  echo "$(CFN_LINT) -- template/template.yaml" && \
	  $(CFN_LINT) -- $(SAM_TEMPLATE) && echo "cfn-lint: the CDK, example app and SAM templates are clean"; \
	else \
	  echo "NOTICE: $(CFN_LINT) not found: skipping the CloudFormation lint of the synthesized, example app and SAM templates (pip install cfn-lint)"; \
	fi
	@$(MAKE) --no-print-directory -f $(firstword $(MAKEFILE_LIST)) sam-build-check

# The CDK app builds the functions from source when it is synthesized: no
# make build first (docs/deploy.md).
synth: deps-infra ## Synthesize the CDK app into infra/cdk.out (settings: STREAM, TARGET_ARN, ...)
	$(CDK_RUN) synth --quiet -o cdk.out $(CDK_CONTEXT)
	@echo "templates in infra/cdk.out: $$(cd $(INFRA_DIR)/cdk.out && ls *.template.json)"

diff: deps-infra ## Show what deploy would change in the AWS account (needs credentials)
	$(CDK_RUN) diff -o cdk.out $(CDK_CONTEXT)

deploy: deps-infra ## Deploy: make deploy STREAM=<name|arn> TARGET_ARN=<arn> [START_POSITION= BATCH_SIZE= MAX_RETRY_ATTEMPTS= ON_FAILURE_DESTINATION= ...]
	@test -n "$(STREAM)$(CREATE_SHARDS)" || { echo "set STREAM=<name or ARN> (or CREATE_SHARDS=N with STREAM=<new name>)"; exit 1; }
	@test -n "$(TARGET_ARN)" || { echo "set TARGET_ARN=<target Lambda ARN or name>"; exit 1; }
	$(CDK_RUN) deploy -o cdk.out --require-approval broadening $(CDK_CONTEXT)

destroy: deps-infra ## Delete the stack (the lease table is retained by default)
	$(CDK_RUN) destroy -o cdk.out $(CDK_CONTEXT)

# SAM (on your own machine, with Docker; see docs/local-testing.md). The
# template's functions have BuildMethod go1.x: sam build builds them from
# source with the go on PATH; sam-build adds what make build sets.
SAM_ARCH      ?= arm64
SAM_BUILD_DIR := $(INFRA_ROOT)/build/sam
SAM_BUILT     := $(SAM_BUILD_DIR)/template.yaml
SAM_ENV       ?= $(INFRA_ROOT)/template/env/localstack.json
SAM_EVENT     ?= $(INFRA_ROOT)/template/events/shardreader-first.json
SAM_FUNCTION  ?= ShardReaderFunction
SAM_PARAMS    ?= Architecture=$(SAM_ARCH)
SAM_DOCKER_NETWORK ?= shardloop
SAM_GO_ENV     = CGO_ENABLED=0 GOFLAGS="-trimpath -tags=lambda.norpc"

sam-build: ## sam build: both functions from source into build/sam (SAM_ARCH=arm64|x86_64)
	@command -v $(SAM) >/dev/null || { echo "the SAM CLI ($(SAM)) is not installed: see docs/local-testing.md"; exit 1; }
	$(SAM_GO_ENV) $(SAM) build -t $(SAM_TEMPLATE) --build-dir $(SAM_BUILD_DIR) --parameter-overrides $(SAM_PARAMS)

sam-invoke: sam-build ## sam local invoke one function against LocalStack (SAM_FUNCTION, SAM_EVENT, SAM_ENV)
	$(SAM) local invoke $(SAM_FUNCTION) -t $(SAM_BUILT) -e $(SAM_EVENT) --env-vars $(SAM_ENV) \
	  --parameter-overrides $(SAM_PARAMS) --docker-network $(SAM_DOCKER_NETWORK)

sam-start-lambda: sam-build ## sam local start-lambda on 127.0.0.1:3001 against LocalStack (SAM_ENV)
	$(SAM) local start-lambda -t $(SAM_BUILT) --env-vars $(SAM_ENV) \
	  --parameter-overrides $(SAM_PARAMS) --docker-network $(SAM_DOCKER_NETWORK)

# Where the SAM CLI is installed, test-infra runs sam build on the template
# (the Go tests check its build metadata and build as it does where not).
sam-build-check:
	@if command -v $(SAM) >/dev/null 2>&1; then \
	  out=$$(mktemp -d) && $(SAM_GO_ENV) $(SAM) build -t $(SAM_TEMPLATE) --build-dir $$out && \
	  for fn in CoordinatorFunction ShardReaderFunction; do test -x $$out/$$fn/bootstrap || { echo "sam build made no $$fn/bootstrap"; exit 1; }; done && \
	  echo "sam build: both functions built from source" && rm -rf $$out; \
	else \
	  echo "NOTICE: $(SAM) not found: sam build not run (the Go tests check the template's BuildMethod and build as sam build does)"; \
	fi
