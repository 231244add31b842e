// Package machine is the guest program a simulated sandbox runs inside its
// own namespaces (see src/simulator/isolate): with it, the envd guest and the
// echo guests are ordinary programs of an isolated Linux system, as they
// would be on a sandboxd machine, instead of handlers the node serves from
// the host.
//
// # Lifecycle
//
// A warm sandbox is started with Program and its Config before anyone
// claims it, so the namespaces, the overlay root and this program are
// already up when a claim arrives; only the claim's identity is missing.
// The program then listens on 127.0.0.1:ControlPort inside and waits.
// Deliver sends the claim (the sandbox's id and claim token); the program
// accepts exactly one, starts envd on 127.0.0.1:EnvdPort (its access token
// derived from the claim token) and the echo guests, and answers only once
// they all listen, so whoever delivered the claim can reach them at once.
// Everything ends when the program's context does (the sandbox stopping).
//
// With Config.CodeInterpreter the program also starts e2b's code-interpreter
// server (src/simulator/guest/codeinterp) as the sandbox's user when the
// machine boots, before any claim, so its kernel is warm; the claim hands it
// envd's access token.
//
// # What runs where
//
// The program itself runs as root inside the sandbox. envd serves the
// sandbox's whole filesystem (envd.Config.Machine): "/" is the template's
// root, relative paths resolve against the user's home, and commands run as
// the sandbox's user (isolate.Spec.User), with that user's ids, home and
// PATH, on the sandbox's hostname and loopback, so a listener a command
// opens is a real guest port.
//
// SECURITY: ControlPort accepts a claim from anything that reaches it.
// The node's relay must never let a client reach it, and a process inside
// the sandbox can only reach it after the claim, when it answers 409.
package machine
