package wire

import (
	"encoding/json"
	"time"
)

// The template and build bodies of e2b's OpenAPI spec, as far as this
// surface serves them.

// TemplateBuildRequest is POST /v3/templates (TemplateBuildRequestV3).
type TemplateBuildRequest struct {
	Name          string   `json:"name,omitempty"`
	Alias         string   `json:"alias,omitempty"`
	Tags          []string `json:"tags,omitempty"`
	TeamID        string   `json:"teamID,omitempty"`
	CPUCount      *int     `json:"cpuCount,omitempty"`
	MemoryMB      *int     `json:"memoryMB,omitempty"`
	MinFreeDiskMB *int     `json:"minFreeDiskMb,omitempty"`
}

// TemplateRequestResponse answers it (TemplateRequestResponseV3).
type TemplateRequestResponse struct {
	TemplateID string   `json:"templateID"`
	BuildID    string   `json:"buildID"`
	Public     bool     `json:"public"`
	Names      []string `json:"names"`
	Aliases    []string `json:"aliases"`
	Tags       []string `json:"tags"`
}

// FileUploadResponse is GET /templates/{id}/files/{hash}
// (TemplateBuildFileUpload).
type FileUploadResponse struct {
	Present bool              `json:"present"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// BuildLogEntry is e2b's BuildLogEntry.
type BuildLogEntry struct {
	Timestamp time.Time `json:"timestamp"`
	Level     string    `json:"level"`
	Message   string    `json:"message"`
	Step      string    `json:"step,omitempty"`
}

// BuildStatusReason is e2b's BuildStatusReason.
type BuildStatusReason struct {
	Message    string          `json:"message"`
	Step       string          `json:"step,omitempty"`
	LogEntries []BuildLogEntry `json:"logEntries"`
}

// BuildInfo is GET /templates/{id}/builds/{buildID}/status
// (TemplateBuildInfo).
type BuildInfo struct {
	TemplateID string             `json:"templateID"`
	BuildID    string             `json:"buildID"`
	Status     string             `json:"status"`
	Logs       []string           `json:"logs"`
	LogEntries []BuildLogEntry    `json:"logEntries"`
	Reason     *BuildStatusReason `json:"reason,omitempty"`
}

// TemplateListed is one row of GET /templates (Template).
type TemplateListed struct {
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

// TemplateBuild is one build of GET /templates/{id} (TemplateBuild).
type TemplateBuild struct {
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

// TemplateDetail is GET /templates/{id} (TemplateWithBuilds).
type TemplateDetail struct {
	TemplateID    string          `json:"templateID"`
	Public        bool            `json:"public"`
	Aliases       []string        `json:"aliases"`
	Names         []string        `json:"names"`
	CreatedAt     time.Time       `json:"createdAt"`
	UpdatedAt     time.Time       `json:"updatedAt"`
	LastSpawnedAt *time.Time      `json:"lastSpawnedAt"`
	SpawnCount    int             `json:"spawnCount"`
	Builds        []TemplateBuild `json:"builds"`
}

// TemplateAliasResponse is GET /templates/aliases/{alias}.
type TemplateAliasResponse struct {
	TemplateID string `json:"templateID"`
	Public     bool   `json:"public"`
}

// AssignTagsRequest is POST /templates/tags (AssignTemplateTagsRequest).
type AssignTagsRequest struct {
	Target string   `json:"target"`
	Tags   []string `json:"tags"`
}

// AssignedTags answers it (AssignedTemplateTags).
type AssignedTags struct {
	BuildID string   `json:"buildID"`
	Tags    []string `json:"tags"`
}

// DeleteTagsRequest is DELETE /templates/tags (DeleteTemplateTagsRequest).
type DeleteTagsRequest struct {
	Name string   `json:"name"`
	Tags []string `json:"tags"`
}

// TemplateTag is one row of GET /templates/{templateID}/tags (TemplateTag).
type TemplateTag struct {
	Tag       string    `json:"tag"`
	BuildID   string    `json:"buildID"`
	CreatedAt time.Time `json:"createdAt"`
}

// TemplateUpdateRequest is PATCH /templates/{id} and /v2/templates/{id}
// (TemplateUpdateRequest).
type TemplateUpdateRequest struct {
	Public *bool `json:"public,omitempty"`
}

// TemplateUpdateResponse answers the v2 route (TemplateUpdateResponse).
type TemplateUpdateResponse struct {
	Names []string `json:"names"`
}

// BuildLogsResponse is e2b's TemplateBuildLogsResponse.
type BuildLogsResponse struct {
	Logs []BuildLogEntry `json:"logs"`
}
