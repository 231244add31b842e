package sandboxd

import (
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// Lease bounds and the guest port a node relays e2b's envd on.
const (
	// DefaultTTL is the lease a node grants when ttl_seconds is 0.
	DefaultTTL = 300 * time.Second
	// MaxTTL is the longest lease a node grants; longer requests are clamped.
	MaxTTL = 24 * time.Hour

	// EnvdPort is the guest port e2b's envd listens on.
	EnvdPort = 49983
)

// ClaimRequest is the body of POST /v1/claim.
type ClaimRequest struct {
	Template   string `json:"template"`
	Net        string `json:"net,omitempty"`
	Size       string `json:"size,omitempty"`
	TTLSeconds int    `json:"ttl_seconds,omitempty"`
	// ClaimRef is an opaque caller reference echoed by the sandbox index;
	// the aggregated apiserver uses <namespace>/<name>.
	ClaimRef string `json:"claim_ref,omitempty"`
	// Metadata are caller labels, fixed at claim time, that the sandbox
	// index echoes and filters on (?metadata=key=value). ValidateMetadata
	// holds the bounds; a node answers 400 past them.
	Metadata map[string]string `json:"metadata,omitempty"`
	// NoRedirect makes the node serve the claim itself instead of naming
	// peers; set on the retry at a redirect target.
	NoRedirect bool `json:"no_redirect,omitempty"`
	// RequirePromoted makes the node clone a promoted template it holds
	// for the key, never a warm VM or a cold boot (404 when it holds
	// none); a redirect answer sets it for its retry.
	RequirePromoted bool `json:"require_promoted,omitempty"`
	// Volumes are the catalog volumes to attach, in order (at most
	// MaxClaimVolumes, names unique); see VolumeMount.
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// VolumesAttachOnly attaches every volume without mounting it; it needs
	// at least one volume and no entry may carry a Mount.
	VolumesAttachOnly bool `json:"volumes_attach_only,omitempty"`
	// OnExpire is what the node does when the lease ends: ExpireDestroy
	// (the default) or ExpireArchive.
	OnExpire string `json:"on_expire,omitempty"`
	// Egress false claims without any egress policy; nil or true keeps the
	// policy the claim would get.
	Egress *bool `json:"egress,omitempty"`
	// Env is the claim's own environment (ValidateEnv holds the bounds).
	Env map[string]EnvEntry `json:"env,omitempty"`
}

// Key is the pool key the request claims from, with defaults applied.
func (r ClaimRequest) Key() sandbox.PoolKey {
	return sandbox.PoolKey{Template: r.Template, Net: r.Net, Size: r.Size}.WithDefaults()
}

// ClaimResponse is the raw answer of POST /v1/claim (and of a checkpoint
// claim): either a granted claim or a redirect naming peers to retry at.
type ClaimResponse struct {
	ID             string    `json:"id,omitempty"`
	Token          string    `json:"token,omitempty"`
	Deadline       time.Time `json:"deadline,omitzero"`
	OwnerAddr      string    `json:"owner_addr,omitempty"`
	TemplateDigest string    `json:"template_digest,omitempty"`
	FromCheckpoint string    `json:"from_checkpoint,omitempty"`
	// NetRoute is how the guest reaches the network: "relay", "direct"
	// or "none".
	NetRoute string `json:"net_route,omitempty"`
	// Volumes echoes the applied volumes (never on a redirect).
	Volumes []VolumeMount `json:"volumes,omitempty"`

	Redirect        []string `json:"redirect,omitempty"`
	RequirePromoted bool     `json:"require_promoted,omitempty"`
}

// IsRedirect reports whether the node answered with peers instead of a claim.
func (r *ClaimResponse) IsRedirect() bool { return len(r.Redirect) > 0 }

// Claim is a granted sandbox: its id, its own bearer token, its lease and
// the node that owns it.
type Claim struct {
	ID             string        `json:"id"`
	Token          string        `json:"token"`
	Deadline       time.Time     `json:"deadline"`
	OwnerAddr      string        `json:"owner_addr"`
	TemplateDigest string        `json:"template_digest,omitempty"`
	FromCheckpoint string        `json:"from_checkpoint,omitempty"`
	NetRoute       string        `json:"net_route,omitempty"`
	Volumes        []VolumeMount `json:"volumes,omitempty"`
}

// PoolSpec is one desired pool in PUT /v1/pools.
type PoolSpec struct {
	Template             string `json:"template"`
	Net                  string `json:"net,omitempty"`
	Size                 string `json:"size,omitempty"`
	Warm                 int    `json:"warm"`
	WarmMax              int    `json:"warm_max,omitempty"`
	IdleHibernateSeconds int    `json:"idle_hibernate_seconds,omitempty"`
}

// Key is the pool key of the spec, with defaults applied.
func (p PoolSpec) Key() sandbox.PoolKey {
	return sandbox.PoolKey{Template: p.Template, Net: p.Net, Size: p.Size}.WithDefaults()
}

// PoolsRequest is the body of PUT /v1/pools: the node's whole desired set.
type PoolsRequest struct {
	Pools []PoolSpec `json:"pools"`
}

// PoolStatus is one pool row of GET /v1/info.
type PoolStatus struct {
	Key       sandbox.PoolKey `json:"key"`
	Warm      int             `json:"warm"`
	Refilling int             `json:"refilling"`
	Target    int             `json:"target"`
	Golden    bool            `json:"golden"`
}

// Info is the GET /v1/info payload (also answered by PUT /v1/pools and the
// drain verbs).
type Info struct {
	Pools      []PoolStatus `json:"pools"`
	Claimed    int          `json:"claimed"`
	Hibernated int          `json:"hibernated"`
	Archived   int          `json:"archived"`
	// Failed counts the claims whose VMM is down and was not restarted
	// (included in Claimed); absent at zero.
	Failed           int      `json:"failed,omitempty"`
	Draining         bool     `json:"draining,omitempty"`
	AtCapacity       bool     `json:"at_capacity,omitempty"`
	AtCapacityReason string   `json:"at_capacity_reason,omitempty"`
	Peers            []string `json:"peers,omitempty"`
	// Templates are the node's promoted templates, sorted by key; absent
	// when it holds none.
	Templates []TemplateInfo `json:"templates,omitempty"`
}

// Pool returns the status row for key, if the node has that pool.
func (i *Info) Pool(key sandbox.PoolKey) (PoolStatus, bool) {
	key = key.WithDefaults()
	for _, p := range i.Pools {
		if p.Key == key {
			return p, true
		}
	}
	return PoolStatus{}, false
}

// TemplateInfo is one promoted template in GET /v1/info: a sandbox's disk
// published under a pool key, cloned on demand by claims of that key.
type TemplateInfo struct {
	Key sandbox.PoolKey `json:"key"`
	// ContentDigest identifies the saved files ("sha256:<hex>"); promoting
	// unchanged files again gives the same digest.
	ContentDigest string `json:"content_digest"`
	// Tenant is who promoted it; absent for the root token.
	Tenant        string    `json:"tenant,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	CPUCount      int       `json:"cpu_count"`
	MemTotalBytes int64     `json:"mem_total_bytes"`
	// Labels are the template's labels (SetTemplateLabels); absent when
	// none are set.
	Labels map[string]string `json:"labels,omitempty"`
}

// Sandbox is one row of the sandbox index (GET /v1/sandboxes and
// GET /v1/sandboxes/{id}). Token is set only on the per-id read by the
// configured root token.
type Sandbox struct {
	ID             string          `json:"id"`
	Key            sandbox.PoolKey `json:"key"`
	Deadline       time.Time       `json:"deadline"`
	ClaimedAt      *time.Time      `json:"claimed_at,omitempty"`
	Hibernated     bool            `json:"hibernated"`
	Archived       bool            `json:"archived,omitempty"`
	FromCheckpoint string          `json:"from_checkpoint,omitempty"`
	ClaimRef       string          `json:"claim_ref,omitempty"`
	// Metadata are the labels the claim was made with; absent when none.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Volumes are the claim's applied volumes; absent when none.
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// OnExpire is the claim's expiry action; absent for the default.
	OnExpire string `json:"on_expire,omitempty"`
	// Restarts counts the cold boots that replaced an exited VMM (each
	// loses guest memory); RestartedAt stamps the last one.
	Restarts    int        `json:"restarts,omitempty"`
	RestartedAt *time.Time `json:"restarted_at,omitempty"`
	// Failed names why the sandbox's VMM is down and was not restarted;
	// empty while the sandbox is serviceable. A failed sandbox stays
	// listed (and claimed) until it is released, woken or reaped.
	Failed string `json:"failed,omitempty"`
	Token  string `json:"token,omitempty"`
}

// SandboxList is the GET /v1/sandboxes payload.
type SandboxList struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// RenewRequest is the body of POST /v1/sandboxes/{id}/renew.
type RenewRequest struct {
	TTLSeconds int `json:"ttl_seconds"`
	// OnExpire switches the expiry action; empty keeps the current one.
	OnExpire string `json:"on_expire,omitempty"`
}

// RenewResponse carries the lease the node granted.
type RenewResponse struct {
	Deadline time.Time `json:"deadline"`
}

// ForkRequest is the body of POST /v1/sandboxes/{id}/fork. Token is the
// parent sandbox's own token (the ownership proof); the root caller may
// leave it empty to act by id.
type ForkRequest struct {
	Token          string `json:"token,omitempty"`
	Count          int    `json:"count"`
	TTLSeconds     int    `json:"ttl_seconds,omitempty"`
	ClaimRefPrefix string `json:"claim_ref_prefix,omitempty"`
	// OnExpire overrides the expiry action the children inherit from the
	// parent.
	OnExpire string `json:"on_expire,omitempty"`
}

// ForkResponse lists one claim per child.
type ForkResponse struct {
	Children []Claim `json:"children"`
}

// CheckpointRequest is the body of POST /v1/sandboxes/{id}/checkpoint.
type CheckpointRequest struct {
	Token string `json:"token,omitempty"`
	Name  string `json:"name,omitempty"`
}

// Checkpoint is one checkpoint record.
type Checkpoint struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"` // always sent, "" when unnamed
	SandboxID string          `json:"sandbox_id"`
	Key       sandbox.PoolKey `json:"key"`
	Tenant    string          `json:"tenant,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
}

// CheckpointResponse wraps a created checkpoint.
type CheckpointResponse struct {
	Checkpoint Checkpoint `json:"checkpoint"`
}

// CheckpointList is the GET /v1/checkpoints payload, newest first.
type CheckpointList struct {
	Checkpoints []Checkpoint `json:"checkpoints"`
}

// CheckpointClaimRequest is the body of POST /v1/checkpoints/{id}/claim.
type CheckpointClaimRequest struct {
	TTLSeconds int  `json:"ttl_seconds,omitempty"`
	NoRedirect bool `json:"no_redirect,omitempty"`
	// ClaimRef places the branch in the Sandbox API like a claim's; the
	// fronts need it to scope the branch to the caller's namespace.
	ClaimRef string `json:"claim_ref,omitempty"`
	// Metadata labels the branch under the same rules as a claim's; the
	// branch carries these, never the source sandbox's.
	Metadata map[string]string `json:"metadata,omitempty"`
	// OnExpire and Env apply to the branch under the claim rules.
	OnExpire string              `json:"on_expire,omitempty"`
	Env      map[string]EnvEntry `json:"env,omitempty"`
}

// PromoteRequest is the body of POST /v1/sandboxes/{id}/promote. Token is
// the sandbox's own token; the root caller may leave it empty to act by id.
// Template names the published template; net and size are the sandbox's.
type PromoteRequest struct {
	Token    string `json:"token,omitempty"`
	Template string `json:"template"`
}

// PromoteResult is the answer of a promote: the key claims of the template
// use and the digest of what was saved.
type PromoteResult struct {
	Key           sandbox.PoolKey `json:"key"`
	ContentDigest string          `json:"content_digest"`
}

// Stats is the GET /v1/sandboxes/{id}/stats payload.
type Stats struct {
	ID              string    `json:"id"`
	CPUCount        int       `json:"cpu_count"`
	MemTotalBytes   int64     `json:"mem_total_bytes"`
	MemUsedBytes    int64     `json:"mem_used_bytes"`
	MemUsedMeasured bool      `json:"mem_used_measured"`
	Hibernated      bool      `json:"hibernated"`
	MeasuredAt      time.Time `json:"measured_at"`
}

// OwnerResponse is the GET /v1/sandboxes/{id}/owner payload.
type OwnerResponse struct {
	OwnerAddr string `json:"owner_addr"`
}

// PeersResponse is the GET /v1/peers payload.
type PeersResponse struct {
	Peers []string `json:"peers"`
}

// ErrorResponse is the body of every sandboxd error answer.
type ErrorResponse struct {
	Error string `json:"error"`
}
