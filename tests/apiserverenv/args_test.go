package apiserverenv

import (
	"slices"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/tests/cluster"
)

func TestArgs(t *testing.T) {
	certs := &cluster.ServingCerts{CertFile: "/d/tls.crt", KeyFile: "/d/tls.key"}
	base := []string{
		"--bind-address=127.0.0.42",
		"--secure-port=4443",
		"--tls-cert-file=/d/tls.crt",
		"--tls-private-key-file=/d/tls.key",
		"--kubeconfig=/d/admin.kubeconfig",
		"--authentication-kubeconfig=/d/admin.kubeconfig",
		"--authorization-kubeconfig=/d/admin.kubeconfig",
		"--sandboxd-token-file=/d/sandboxd-token",
	}
	for _, tc := range []struct {
		name string
		opts Options
		want []string
	}{
		{
			name: "server's default staleness",
			opts: Options{SandboxdTokenFile: "/d/sandboxd-token"},
			want: append(slices.Clone(base), "--enable-warm-pool-driver=false"),
		},
		{
			name: "staleness and extra flags",
			opts: Options{
				SandboxdTokenFile:   "/d/sandboxd-token",
				InventoryStaleAfter: 10 * time.Second,
				ExtraArgs:           []string{"--enable-e2b-api", "--e2b-create-rate=0"},
			},
			want: append(slices.Clone(base),
				"--inventory-stale-after=10s",
				"--enable-warm-pool-driver=false",
				// Last, so a caller can override what Start sets.
				"--enable-e2b-api", "--e2b-create-rate=0"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.opts.args("127.0.0.42", "4443", certs, "/d/admin.kubeconfig")
			if !slices.Equal(got, tc.want) {
				t.Errorf("args =\n  %q\nwant\n  %q", got, tc.want)
			}
		})
	}
}
