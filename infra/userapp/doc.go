// Package userapp holds one test, and no code: examples/cdk-app synthesized as
// a user's own CDK app would be, from a folder outside the repository, with
// the construct building the functions in that app's module. It runs the app
// with the go command rather than linking the CDK bindings, so its test
// binary is small and runs alongside the construct's tests.
package userapp
