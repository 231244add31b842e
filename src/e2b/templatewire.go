package e2b

import (
	"encoding/json"
	"time"
)

// The template and build bodies of e2b's OpenAPI spec, as far as this
// surface serves them.

// templateBuildRequest is POST /v3/templates (TemplateBuildRequestV3).
type templateBuildRequest struct {
	Name          string   `json:"name,omitempty"`
	Alias         string   `json:"alias,omitempty"`
	Tags          []string `json:"tags,omitempty"`
	TeamID        string   `json:"teamID,omitempty"`
	CPUCount      *int     `json:"cpuCount,omitempty"`
	MemoryMB      *int     `json:"memoryMB,omitempty"`
	MinFreeDiskMB *int     `json:"minFreeDiskMb,omitempty"`
}

// templateRequestResponse answers it (TemplateRequestResponseV3).
type templateRequestResponse struct {
	TemplateID string   `json:"templateID"`
	BuildID    string   `json:"buildID"`
	Public     bool     `json:"public"`
	Names      []string `json:"names"`
	Aliases    []string `json:"aliases"`
	Tags       []string `json:"tags"`
}

// fileUploadResponse is GET /templates/{id}/files/{hash}
// (TemplateBuildFileUpload).
type fileUploadResponse struct {
	Present bool              `json:"present"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// buildLogEntry is e2b's BuildLogEntry.
type buildLogEntry struct {
	Timestamp time.Time `json:"timestamp"`
	Level     string    `json:"level"`
	Message   string    `json:"message"`
	Step      string    `json:"step,omitempty"`
}

// buildStatusReason is e2b's BuildStatusReason.
type buildStatusReason struct {
	Message    string          `json:"message"`
	Step       string          `json:"step,omitempty"`
	LogEntries []buildLogEntry `json:"logEntries"`
}

// buildInfo is GET /templates/{id}/builds/{buildID}/status
// (TemplateBuildInfo).
type buildInfo struct {
	TemplateID string             `json:"templateID"`
	BuildID    string             `json:"buildID"`
	Status     string             `json:"status"`
	Logs       []string           `json:"logs"`
	LogEntries []buildLogEntry    `json:"logEntries"`
	Reason     *buildStatusReason `json:"reason,omitempty"`
}

// templateListed is one row of GET /templates (Template).
type templateListed struct {
	TemplateID    string          `json:"templateID"`
	BuildID       string          `json:"buildID"`
	BuildStatus   string          `json:"buildStatus"`
	CPUCount      int             `json:"cpuCount"`
	MemoryMB      int             `json:"memoryMB"`
	DiskSizeMB    int             `json:"diskSizeMB"`
	EnvdVersion   string          `json:"envdVersion"`
	Public        bool            `json:"public"`
	Aliases       []string        `json:"aliases"`
	Names         []string        `json:"names"`
	CreatedAt     time.Time       `json:"createdAt"`
	UpdatedAt     time.Time       `json:"updatedAt"`
	CreatedBy     json.RawMessage `json:"createdBy"`
	LastSpawnedAt *time.Time      `json:"lastSpawnedAt"`
	SpawnCount    int             `json:"spawnCount"`
	BuildCount    int             `json:"buildCount"`
}

// templateBuild is one build of GET /templates/{id} (TemplateBuild).
type templateBuild struct {
	BuildID     string     `json:"buildID"`
	Status      string     `json:"status"`
	CPUCount    int        `json:"cpuCount"`
	MemoryMB    int        `json:"memoryMB"`
	DiskSizeMB  int        `json:"diskSizeMB,omitempty"`
	EnvdVersion string     `json:"envdVersion,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
	FinishedAt  *time.Time `json:"finishedAt,omitempty"`
}

// templateDetail is GET /templates/{id} (TemplateWithBuilds).
type templateDetail struct {
	TemplateID    string          `json:"templateID"`
	Public        bool            `json:"public"`
	Aliases       []string        `json:"aliases"`
	Names         []string        `json:"names"`
	CreatedAt     time.Time       `json:"createdAt"`
	UpdatedAt     time.Time       `json:"updatedAt"`
	LastSpawnedAt *time.Time      `json:"lastSpawnedAt"`
	SpawnCount    int             `json:"spawnCount"`
	Builds        []templateBuild `json:"builds"`
}

// templateAliasResponse is GET /templates/aliases/{alias}.
type templateAliasResponse struct {
	TemplateID string `json:"templateID"`
	Public     bool   `json:"public"`
}
