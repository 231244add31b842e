package wire

import (
	"encoding/json"
	"time"
)

// The JSON shapes of e2b's control API (spec/openapi.yml in e2b-dev/E2B),
// limited to the fields this surface fills or reads.

// NewSandboxRequest is the body of POST /sandboxes and POST /v2/sandboxes.
// Every field the SDK sends is declared, so an unknown field is refused.
type NewSandboxRequest struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int              `json:"timeout,omitempty"`
	AutoPause           *bool             `json:"autoPause,omitempty"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory,omitempty"`
	AutoResume          json.RawMessage   `json:"autoResume,omitempty"`
	Secure              *bool             `json:"secure,omitempty"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	Network             *NetworkConfig    `json:"network,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
	MCP                 json.RawMessage   `json:"mcp,omitempty"`
	IAM                 json.RawMessage   `json:"iam,omitempty"`
	VolumeMounts        []VolumeMount     `json:"volumeMounts,omitempty"`
}

// VolumeMount is e2b's SandboxVolumeMount: a catalog volume and where the
// sandbox sees it.
type VolumeMount struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// NetworkConfig is e2b's SandboxNetworkConfig. Only the fields that change
// nothing about egress are honoured; the rest are refused because the
// lanes cannot enforce them.
type NetworkConfig struct {
	AllowPublicTraffic *bool           `json:"allowPublicTraffic,omitempty"`
	AllowOut           []string        `json:"allowOut,omitempty"`
	DenyOut            []string        `json:"denyOut,omitempty"`
	MaskRequestHost    *string         `json:"maskRequestHost,omitempty"`
	Rules              json.RawMessage `json:"rules,omitempty"`
	EgressProxy        json.RawMessage `json:"egressProxy,omitempty"`
	HTTPSPorts         json.RawMessage `json:"httpsPorts,omitempty"`
}

// ConnectRequest is the body of POST /v2/sandboxes/{id}/connect and
// /sandboxes/{id}/connect.
type ConnectRequest struct {
	Timeout *int  `json:"timeout,omitempty"`
	Memory  *bool `json:"memory,omitempty"`
}

// ResumeRequest is the body of the deprecated POST /sandboxes/{id}/resume.
type ResumeRequest struct {
	Timeout   *int  `json:"timeout,omitempty"`
	AutoPause *bool `json:"autoPause,omitempty"`
}

// TimeoutRequest is the body of POST /sandboxes/{id}/timeout.
type TimeoutRequest struct {
	Timeout *int `json:"timeout"`
}

// RefreshRequest is the body of POST /sandboxes/{id}/refreshes.
type RefreshRequest struct {
	Duration *int `json:"duration,omitempty"`
}

// PauseRequest is the body of POST /sandboxes/{id}/pause.
type PauseRequest struct {
	Memory *bool `json:"memory,omitempty"`
}

// SnapshotRequest is the body of POST /sandboxes/{id}/snapshots.
type SnapshotRequest struct {
	Name string `json:"name,omitempty"`
}

// SandboxResponse is e2b's Sandbox: the answer to create, connect and
// resume.
type SandboxResponse struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             string  `json:"domain"`
}

// ListedSandbox is e2b's ListedSandbox; SandboxDetail (GET one) adds the
// access token and domain.
type ListedSandbox struct {
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

type SandboxDetail struct {
	ListedSandbox
	AllowInternetAccess *bool          `json:"allowInternetAccess,omitempty"`
	EnvdAccessToken     string         `json:"envdAccessToken,omitempty"`
	Domain              string         `json:"domain"`
	Lifecycle           *LifecycleInfo `json:"lifecycle,omitempty"`
	Network             *NetworkInfo   `json:"network,omitempty"`
	VolumeMounts        []VolumeMount  `json:"volumeMounts,omitempty"`
}

// NetworkInfo is the part of e2b's SandboxNetworkConfig a sandbox reports:
// denyOut of everything for one with no egress.
type NetworkInfo struct {
	DenyOut []string `json:"denyOut,omitempty"`
}

// LifecycleInfo is e2b's SandboxLifecycle: what happens at the timeout,
// and whether traffic wakes the sandbox once paused.
type LifecycleInfo struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"`
}

// BatchMetricsResponse is e2b's SandboxesWithMetrics.
type BatchMetricsResponse struct {
	Sandboxes map[string]SandboxMetric `json:"sandboxes"`
}

// SandboxMetric is e2b's SandboxMetric.
type SandboxMetric struct {
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

// SnapshotInfo is e2b's SnapshotInfo.
type SnapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

// ErrorBody is e2b's Error.
type ErrorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Sandbox states in e2b's vocabulary.
const (
	StateRunning = "running"
	StatePaused  = "paused"
)

// ForkRequest is e2b's SandboxForkRequest.
type ForkRequest struct {
	Count   *int `json:"count,omitempty"`
	Timeout *int `json:"timeout,omitempty"`
}

// ForkResult is e2b's SandboxForkResult: one per child asked for, with the
// sandbox or the error that kept it from starting.
type ForkResult struct {
	Sandbox *SandboxResponse `json:"sandbox,omitempty"`
	Error   *ErrorBody       `json:"error,omitempty"`
}

// VolumeListed is e2b's Volume: a catalog name is its id.
type VolumeListed struct {
	VolumeID string `json:"volumeID"`
	Name     string `json:"name"`
}
