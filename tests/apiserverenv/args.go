package apiserverenv

import "github.com/cocoonstack/sandbox-operator/tests/cluster"

// args is the server's command line: serve the aggregated API on host and
// port with certs, reach the cluster (and delegate authentication and
// authorization to it) through kubeconfig, then o.ExtraArgs.
func (o Options) args(host, port string, certs *cluster.ServingCerts, kubeconfig string) []string {
	args := []string{
		"--bind-address=" + host,
		"--secure-port=" + port,
		"--tls-cert-file=" + certs.CertFile,
		"--tls-private-key-file=" + certs.KeyFile,
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--sandboxd-token-file=" + o.SandboxdTokenFile,
	}
	if o.InventoryStaleAfter != 0 {
		args = append(args, "--inventory-stale-after="+o.InventoryStaleAfter.String())
	}
	// Callers set the fleet's pools themselves. The warm-pool driver would
	// manage them from SandboxWarmPool objects, whose CRD a tests/cluster
	// cluster does not serve.
	args = append(args, "--enable-warm-pool-driver=false")
	return append(args, o.ExtraArgs...)
}
