// run.mjs executes template/statemachine.asl.json in aws-local-stepfunctions
// (a real ASL interpreter) for e2e/asl_interpreter_test.go.
//
// Usage: node run.mjs <config.json>, config:
//   definition      path of the ASL file
//   substitutions   {"Name": "value"}: each ${Name} in the file, as CDK's
//                   and SAM's DefinitionSubstitutions do; any ${...} left
//                   over is an error
//   lambdaEndpoint  base URL of a Lambda Invoke API (the e2e Lambda host)
//   stateMachineArn the ARN the executions belong to ($$.StateMachine.Id)
//   executionName   the first execution's name
//   input           the first execution's input
//   maxExecutions   continue-as-new starts at most this many executions in
//                   all; a StartExecution past it is recorded, answered as
//                   AWS would, and not run
//
// The interpreter does not implement the optimized integrations, so every
// Task whose Resource is one of them gets a local handler (by state name)
// that receives the effective input (after Parameters) and returns what the
// service integration returns; the state's own ResultSelector, ResultPath
// and OutputPath then run in the interpreter:
//   arn:aws:states:::lambda:invoke          → POST lambdaEndpoint's Invoke API;
//                                             {ExecutedVersion, Payload, StatusCode}
//   arn:aws:states:::states:startExecution  → start an execution in this runner;
//                                             {ExecutionArn, StartDate}
//
// stdout is one JSON object per line: the interpreter's event log, each
// event tagged with its execution ("execution"), plus "StartExecution"
// records and a final {"type":"RunnerDone"}. Errors go to stderr, exit 1.
import { readFileSync } from 'node:fs';
import { StateMachine } from 'aws-local-stepfunctions';

const LAMBDA_INVOKE = 'arn:aws:states:::lambda:invoke';
const START_EXECUTION = 'arn:aws:states:::states:startExecution';

const cfg = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const emit = (ev) => process.stdout.write(JSON.stringify(ev) + '\n');

function substitute(text, subs) {
  const out = text.replace(/\$\{([A-Za-z0-9_]+)\}/g, (m, name) =>
    Object.hasOwn(subs, name) ? JSON.stringify(String(subs[name])).slice(1, -1) : m);
  const left = out.match(/\$\{[^}]*\}/g);
  if (left) throw new Error(`unsubstituted placeholders in ${cfg.definition}: ${[...new Set(left)].join(', ')}`);
  return out;
}

const definition = JSON.parse(substitute(readFileSync(cfg.definition, 'utf8'), cfg.substitutions ?? {}));
// The constructor validates the definition (asl-validator, ARNs and paths).
const machine = new StateMachine(definition);

function taskError(name, cause) {
  const e = new Error(typeof cause === 'string' ? cause : JSON.stringify(cause));
  e.name = name;
  return e;
}

async function lambdaInvoke(params) {
  const { FunctionName, Payload, InvocationType = 'RequestResponse', Qualifier } = params ?? {};
  if (typeof FunctionName !== 'string' || FunctionName === '') {
    throw taskError('Lambda.InvalidParameterValueException', 'FunctionName is required: ' + JSON.stringify(params));
  }
  let url = `${cfg.lambdaEndpoint}/2015-03-31/functions/${encodeURIComponent(FunctionName)}/invocations`;
  if (Qualifier) url += `?Qualifier=${encodeURIComponent(Qualifier)}`;
  let res;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Amz-Invocation-Type': InvocationType },
      // Step Functions sends the Payload field as the request body.
      body: Payload === undefined ? '{}' : JSON.stringify(Payload),
    });
  } catch (err) {
    throw taskError('Lambda.SdkClientException', String(err?.cause ?? err));
  }
  const body = await res.text();
  if (res.status === 429) throw taskError('Lambda.TooManyRequestsException', body);
  if (res.status >= 300) {
    const type = res.headers.get('x-amzn-errortype')?.split(':')[0] || (res.status >= 500 ? 'ServiceException' : 'AWSLambdaException');
    throw taskError('Lambda.' + type, body);
  }
  let payload = body;
  try {
    payload = body === '' ? null : JSON.parse(body);
  } catch {
    // not JSON: Step Functions hands the text on as a string
  }
  if (res.headers.get('x-amz-function-error')) {
    // A function error fails the task with the function's errorType.
    const type = payload && typeof payload === 'object' && payload.errorType;
    throw taskError(type || 'Lambda.Unknown', body);
  }
  return {
    ExecutedVersion: res.headers.get('x-amz-executed-version') ?? '$LATEST',
    Payload: InvocationType === 'RequestResponse' ? payload : '',
    SdkHttpMetadata: { HttpStatusCode: res.status },
    SdkResponseMetadata: { RequestId: res.headers.get('x-amzn-requestid') ?? '' },
    StatusCode: res.status,
  };
}

const executions = new Map(); // name -> {arn, input}
const running = [];

function executionArn(stateMachineArn, name) {
  return stateMachineArn.replace(':stateMachine:', ':execution:') + ':' + name;
}

async function startExecution(from, params) {
  const { StateMachineArn, Name, Input } = params ?? {};
  emit({ type: 'StartExecution', execution: from, request: params ?? null });
  if (StateMachineArn !== cfg.stateMachineArn) {
    throw taskError('StepFunctions.StateMachineDoesNotExistException', `state machine ${StateMachineArn} does not exist (this runner has ${cfg.stateMachineArn})`);
  }
  if (Name !== undefined && (typeof Name !== 'string' || !/^[A-Za-z0-9_-]{1,80}$/.test(Name))) {
    throw taskError('StepFunctions.InvalidNameException', `invalid execution name ${JSON.stringify(Name)}`);
  }
  // StartExecution takes the input as a string; the optimized integration
  // also accepts JSON, which it serializes.
  let input = Input ?? {};
  if (typeof input === 'string') {
    try {
      input = JSON.parse(input);
    } catch {
      throw taskError('StepFunctions.InvalidExecutionInputException', `input is not JSON: ${Input}`);
    }
  }
  const name = Name ?? `exec-${executions.size + 1}`;
  const arn = executionArn(StateMachineArn, name);
  const existing = executions.get(name);
  if (existing) {
    // Idempotent for the same input, as StartExecution is on a Standard machine.
    if (JSON.stringify(existing.input) === JSON.stringify(input)) return { ExecutionArn: arn, StartDate: existing.startDate };
    throw taskError('StepFunctions.ExecutionAlreadyExistsException', `Execution Already Exists: '${arn}'`);
  }
  const startDate = new Date().toISOString();
  if (executions.size >= cfg.maxExecutions) {
    emit({ type: 'StartExecutionNotRun', execution: from, name, arn, input, reason: `maxExecutions ${cfg.maxExecutions} reached` });
    executions.set(name, { arn, input, startDate });
    return { ExecutionArn: arn, StartDate: startDate };
  }
  running.push(runExecution(name, input));
  return { ExecutionArn: arn, StartDate: startDate };
}

function handlersFor(execName) {
  const handlers = {};
  for (const [stateName, state] of Object.entries(definition.States)) {
    if (state.Type !== 'Task') continue;
    if (state.Resource === LAMBDA_INVOKE) handlers[stateName] = (input) => lambdaInvoke(input);
    else if (state.Resource === START_EXECUTION) handlers[stateName] = (input) => startExecution(execName, input);
  }
  return handlers;
}

async function runExecution(name, input) {
  const arn = executionArn(cfg.stateMachineArn, name);
  executions.set(name, { arn, input, startDate: new Date().toISOString() });
  const smName = cfg.stateMachineArn.split(':').pop();
  const execution = machine.run(input, {
    overrides: { taskResourceLocalHandlers: handlersFor(name) },
    context: {
      StateMachine: { Id: cfg.stateMachineArn, Name: smName },
      Execution: { Id: arn, Name: name, RoleArn: 'arn:aws:iam::000000000000:role/shardloop-e2e' },
    },
  });
  const logged = (async () => {
    for await (const ev of execution.eventLogs) emit({ execution: name, ...ev });
  })();
  let outcome;
  try {
    outcome = { status: 'SUCCEEDED', output: await execution.result };
  } catch (err) {
    outcome = { status: 'FAILED', error: err?.name, cause: String(err?.message ?? err) };
  }
  await logged;
  emit({ type: 'ExecutionEnded', execution: name, ...outcome });
}

running.push(runExecution(cfg.executionName, cfg.input));
// Executions started by continue-as-new are appended while we wait.
for (let i = 0; i < running.length; i++) await running[i];
emit({ type: 'RunnerDone', executions: executions.size });
