// Package build keeps the template builds of the e2b surface: each build's
// state (waiting, building, ready, error), its bounded log, and the queue
// that lets at most a configured number run at once.
//
// A build is registered when the SDK requests it, started when the SDK
// sends its definition, and run by a Runner the surface supplies (claim a
// sandbox, run the steps, publish it as a template). Builds live in the
// memory of the process that took them, as the configuration reference
// says: the SDK's status polls must reach the same replica, which is why
// the chart sets client-IP affinity when builds are on.
package build
