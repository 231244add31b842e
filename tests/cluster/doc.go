// Package cluster starts a real, minimal Kubernetes control plane for
// integration tests: etcd embedded in the test process and a kube-apiserver
// process, both on loopback, with RBAC, static-token users and the
// aggregation layer wired so that a test can serve an aggregated API from a
// server of its own.
//
// # Starting
//
//	c := cluster.Start(t)                   // fails t on error; stopped in t.Cleanup
//	c, err := cluster.StartContext(ctx, dir) // for TestMain or benchmarks; call c.Stop()
//
// Options: WithUser adds token users, WithAPIServerFlags appends
// kube-apiserver flags, WithStartTimeout replaces DefaultStartTimeout,
// WithAPIServerBinary names the binary. APIServerBinary resolves the
// default one, for a TestMain or benchmark that wants the build done before
// it measures anything.
//
// The kube-apiserver binary comes from the runfiles location in
// $KUBE_APISERVER under Bazel (the test lists
// //tests/cluster/cmd/kube-apiserver in data and sets
// KUBE_APISERVER = $(rlocationpath ...)); under plain go test it is built
// from tests/cluster/cmd/kube-apiserver with testbin.Locate, stamped with
// the k8s.io/kubernetes version go.mod selects, and cached per user so only
// the first build links it. Its output goes to a log file in the cluster's
// directory; Start logs the tail of it (and of etcd's) when the test fails.
// The process gets SIGTERM, then SIGKILL, at Stop, and on Linux dies with
// the test process whatever happens (parent-death signal).
//
// # Clients and users
//
// AdminConfig, Clientset, Dynamic and Kubeconfig authenticate as AdminUser
// (system:masters). UserConfig(UnprivilegedUser) is "alice" in group
// "developers", with no role bindings: RBAC forbids her everything beyond
// discovery until a test grants more. Kubeconfig is a file suitable as an
// aggregated apiserver's --kubeconfig, --authentication-kubeconfig and
// --authorization-kubeconfig.
//
// # CRDs
//
// InstallCRDs creates CRDs from YAML manifests and waits until they are
// Established, e.g. c.InstallCRDs(ctx, crds.NodeInventoryYAML).
// DryRunCreate submits an object with dryRun=All and strict field
// validation, waiting for discovery to serve its kind, to check it against
// the schema without storing it; ServedRESTMapping and Resource wait the
// same way.
//
// # Aggregated APIs
//
// The kube-apiserver runs with --service-cluster-ip-range=127.0.0.0/24 and
// --enable-aggregator-routing=false, so the aggregator dials an APIService's
// Service at its ClusterIP, which is a loopback address the test can bind.
// RegisterAPIService creates the Service (on a free 127.0.0.x and port),
// an EndpointSlice for the availability check and the APIService, and
// returns the host:port the aggregated server must listen on; then
// WaitAPIServiceAvailable waits for Available=True. The aggregator presents
// the front-proxy client certificate (CN FrontProxyClientName) and passes
// the caller's identity in X-Remote-User, X-Remote-Group and
// X-Remote-Extra-* headers; the CA an aggregated server verifies it with is
// published, as in any cluster, in the ConfigMap ExtensionAuthConfigMap in
// ExtensionAuthNamespace (key ExtensionAuthFrontProxyCAKey), and is also
// FrontProxyCAData.
//
// A Cluster runs no controllers or kubelets: objects that need a
// controller (Pods, Deployments, garbage collection) are stored but never
// acted on. A NodeCluster (StartNode, StartNodeCluster) is the full
// single-node cluster: the same control plane plus kube-controller-manager,
// kube-scheduler, a kubelet on containerd and runc with bridge networking,
// and kube-proxy, all inside network and mount namespaces the process makes
// for itself (RunIsolated, IsolatedCommand), with images imported from OCI
// layouts. docs/local-cluster.md describes it.
package cluster
