package e2b

import (
	"encoding/json"
	"time"
)

// The JSON shapes of e2b's control API (spec/openapi.yml in e2b-dev/E2B),
// limited to the fields this surface fills or reads.

// newSandboxRequest is the body of POST /sandboxes and POST /v2/sandboxes.
// Every field the SDK sends is declared, so an unknown field is refused.
type newSandboxRequest struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int              `json:"timeout,omitempty"`
	AutoPause           *bool             `json:"autoPause,omitempty"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory,omitempty"`
	AutoResume          json.RawMessage   `json:"autoResume,omitempty"`
	Secure              *bool             `json:"secure,omitempty"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	Network             *networkConfig    `json:"network,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
	MCP                 json.RawMessage   `json:"mcp,omitempty"`
	IAM                 json.RawMessage   `json:"iam,omitempty"`
	VolumeMounts        []volumeMount     `json:"volumeMounts,omitempty"`
}

// volumeMount is e2b's SandboxVolumeMount: a catalog volume and where the
// sandbox sees it.
type volumeMount struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// networkConfig is e2b's SandboxNetworkConfig. Only the fields that change
// nothing about egress are honoured; the rest are refused because the
// lanes cannot enforce them.
type networkConfig struct {
	AllowPublicTraffic *bool           `json:"allowPublicTraffic,omitempty"`
	AllowOut           []string        `json:"allowOut,omitempty"`
	DenyOut            []string        `json:"denyOut,omitempty"`
	MaskRequestHost    *string         `json:"maskRequestHost,omitempty"`
	Rules              json.RawMessage `json:"rules,omitempty"`
	EgressProxy        json.RawMessage `json:"egressProxy,omitempty"`
	HTTPSPorts         json.RawMessage `json:"httpsPorts,omitempty"`
}

// connectRequest is the body of POST /v2/sandboxes/{id}/connect and
// /sandboxes/{id}/connect.
type connectRequest struct {
	Timeout *int  `json:"timeout,omitempty"`
	Memory  *bool `json:"memory,omitempty"`
}

// resumeRequest is the body of the deprecated POST /sandboxes/{id}/resume.
type resumeRequest struct {
	Timeout   *int  `json:"timeout,omitempty"`
	AutoPause *bool `json:"autoPause,omitempty"`
}

// timeoutRequest is the body of POST /sandboxes/{id}/timeout.
type timeoutRequest struct {
	Timeout *int `json:"timeout"`
}

// refreshRequest is the body of POST /sandboxes/{id}/refreshes.
type refreshRequest struct {
	Duration *int `json:"duration,omitempty"`
}

// pauseRequest is the body of POST /sandboxes/{id}/pause.
type pauseRequest struct {
	Memory *bool `json:"memory,omitempty"`
}

// snapshotRequest is the body of POST /sandboxes/{id}/snapshots.
type snapshotRequest struct {
	Name string `json:"name,omitempty"`
}

// sandboxResponse is e2b's Sandbox: the answer to create, connect and
// resume.
type sandboxResponse struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             string  `json:"domain"`
}

// listedSandbox is e2b's ListedSandbox; sandboxDetail (GET one) adds the
// access token and domain.
type listedSandbox struct {
	TemplateID  string            `json:"templateID"`
	Alias       string            `json:"alias,omitempty"`
	SandboxID   string            `json:"sandboxID"`
	ClientID    string            `json:"clientID"`
	StartedAt   time.Time         `json:"startedAt"`
	EndAt       time.Time         `json:"endAt"`
	CPUCount    int               `json:"cpuCount"`
	MemoryMB    int               `json:"memoryMB"`
	DiskSizeMB  int               `json:"diskSizeMB"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	State       string            `json:"state"`
	EnvdVersion string            `json:"envdVersion"`
}

type sandboxDetail struct {
	listedSandbox
	AllowInternetAccess *bool          `json:"allowInternetAccess,omitempty"`
	EnvdAccessToken     string         `json:"envdAccessToken,omitempty"`
	Domain              string         `json:"domain"`
	Lifecycle           *lifecycleInfo `json:"lifecycle,omitempty"`
	Network             *networkInfo   `json:"network,omitempty"`
	VolumeMounts        []volumeMount  `json:"volumeMounts,omitempty"`
}

// networkInfo is the part of e2b's SandboxNetworkConfig a sandbox reports:
// denyOut of everything for one with no egress.
type networkInfo struct {
	DenyOut []string `json:"denyOut,omitempty"`
}

// lifecycleInfo is e2b's SandboxLifecycle: what happens at the timeout,
// and whether traffic wakes the sandbox once paused.
type lifecycleInfo struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"`
}

// batchMetricsResponse is e2b's SandboxesWithMetrics.
type batchMetricsResponse struct {
	Sandboxes map[string]sandboxMetric `json:"sandboxes"`
}

// sandboxMetric is e2b's SandboxMetric.
type sandboxMetric struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      int       `json:"cpuCount"`
	CPUUsedPct    float32   `json:"cpuUsedPct"`
	MemUsed       int64     `json:"memUsed"`
	MemTotal      int64     `json:"memTotal"`
	MemCache      int64     `json:"memCache"`
	DiskUsed      int64     `json:"diskUsed"`
	DiskTotal     int64     `json:"diskTotal"`
}

// snapshotInfo is e2b's SnapshotInfo.
type snapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

// errorBody is e2b's Error.
type errorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// envdInit is the part of envd's internal POST /init body this surface
// sends: e2b's orchestrator hands a sandbox its access token and env vars
// this way.
type envdInit struct {
	AccessToken string            `json:"accessToken"`
	EnvVars     map[string]string `json:"envVars,omitempty"`
}

// Sandbox states in e2b's vocabulary.
const (
	stateRunning = "running"
	statePaused  = "paused"
)
