// Package buildsteps runs an e2b template's build steps (RUN, COPY, ENV,
// WORKDIR, USER, then the start and ready commands) inside a sandbox that
// was claimed for the build, by driving the sandbox's envd: its process
// RPCs run commands, its /files endpoint receives the uploaded archives.
//
// The package knows nothing of claims, nodes or publishing: the caller
// hands it an HTTP client that already reaches the right envd (through the
// node's guest-port relay) and the access token envd expects, and turns a
// *StepError into the build's failure.
//
// Everything the runner needs besides the build's own results (uploaded
// archives, extraction directories) lives under one scratch directory in
// the sandbox's /tmp and is removed before Run returns, so a template
// published from the sandbox carries none of it.
package buildsteps
