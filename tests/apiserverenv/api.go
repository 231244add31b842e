package apiserverenv

import "k8s.io/apimachinery/pkg/runtime/schema"

// The aggregated API sandbox-apiserver serves and the Service the cluster
// routes it through, as the chart installs them.
const (
	Group   = "agents.x-k8s.io"
	Version = "v1beta1"

	Namespace   = "sandbox-system"
	ServiceName = "sandbox-apiserver"
)

// SandboxGVR addresses sandboxes for dynamic clients.
var SandboxGVR = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "sandboxes"}

// servingDNSName is the name the aggregator verifies the server's
// certificate against: its Service's in-cluster DNS name.
const servingDNSName = ServiceName + "." + Namespace + ".svc"
