// Package e2b serves an e2b-compatible control REST API over the fleet,
// so the e2b SDKs create, list, pause, resume, fork, snapshot and kill
// sandboxd sandboxes, and build templates, unchanged. Server is the HTTP
// surface: its routes (routes.go, each declaring what authorizes it), the
// handlers, and the Options and Config that sandbox-apiserver and
// sandbox-e2b build it from. Every sandbox call goes through Fleet, so
// the same surface runs over the apiserver's inventory and over the mesh.
//
// What is a concept of its own lives in a subpackage:
//
//   - admission: the create rate, live-sandbox cap and the per-namespace
//     lock and counts the snapshot and upload quotas are decided under.
//   - catalog: the templates builds published, read off the nodes, and
//     the rules of a template reference.
//   - records: what a create chose (metadata, alias, lifecycle), kept as
//     claim labels on the node and cached per process.
//   - wire: the JSON bodies of e2b's OpenAPI spec.
//   - build, buildsteps, buildstore: template builds (their state and
//     queue, the steps run in the build's sandbox, the uploaded archives).
//
// The handlers of the template build API stay here (builds.go,
// buildrun.go): they claim and publish through the same Server as a
// create does.
package e2b
