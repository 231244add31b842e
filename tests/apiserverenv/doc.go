// Package apiserverenv runs sandbox-apiserver as a real process, aggregated
// behind a tests/cluster kube-apiserver, for the integration tests and the
// scale harness that drive it through the kube-apiserver as kubectl and
// client-go would.
//
// A caller starts the cluster and shapes the simulated fleet itself (both
// differ per caller); the rest goes:
//
//	tokenFile, token, err := apiserverenv.WriteSandboxdToken(dir)
//	// start the fleet with token as its nodes' root token, publishing
//	// NodeInventory objects to c
//	s, err := apiserverenv.Start(ctx, c, apiserverenv.Options{
//		Binary: binary, Dir: dir, SandboxdTokenFile: tokenFile,
//	})
//	err = s.WaitReady(ctx) // APIService available, /readyz OK
//	err = apiserverenv.WaitFleetPublished(ctx, c.Dynamic(), f, 0)
//	...
//	err = apiserverenv.Teardown(s, f, c) // nil parts are skipped
//
// Start writes serving certificates, registers the APIService with their
// CA as its caBundle (so the aggregator verifies the server as it would in
// a real cluster) and starts the binary listening on the loopback ClusterIP
// the aggregator dials. The process dies with its parent (see
// testbin.ChildSysProcAttr) should the caller not stop it.
package apiserverenv
