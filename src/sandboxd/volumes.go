package sandboxd

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"strings"
	"unicode"
)

// Volume modes of a claim entry. The read-only default is sent and echoed
// as an absent mode.
const (
	VolumeModeRO = "ro"
	VolumeModeRW = "rw"
)

// MaxClaimVolumes bounds the volumes one claim may attach.
const MaxClaimVolumes = 8

// maxVolumeName bounds a catalog name.
const maxVolumeName = 63

// VolumeMount is one entry of a claim's volumes, as requested and as echoed
// by the claim answer and the sandbox index.
type VolumeMount struct {
	// Name is the catalog name.
	Name string `json:"name"`
	// Mount is where the guest sees the volume: DefaultVolumeMount(Name)
	// when a request leaves it empty; absent from an attach-only echo.
	Mount string `json:"mount,omitempty"`
	// Mode is VolumeModeRW for a writable attach; empty means read-only.
	Mode string `json:"mode,omitempty"`
}

// Volume is one catalog entry of GET /v1/volumes.
type Volume struct {
	Name         string `json:"name"`
	DefaultMount string `json:"default_mount"`
	// SizeBytes and Available are a best-effort stat of the answering
	// node's image.
	SizeBytes int64 `json:"size_bytes"`
	Available bool  `json:"available"`
	// Nodes counts the members declaring the name.
	Nodes int `json:"nodes"`
	// Writable is set only for a writable entry the answering node declares.
	Writable bool `json:"writable,omitempty"`
}

// VolumeList is the GET /v1/volumes payload.
type VolumeList struct {
	Volumes []Volume `json:"volumes"`
}

// Volumes lists the catalog entries the caller may claim (root sees every
// entry the node knows of, a tenant those its access lists permit).
func (c *Client) Volumes(ctx context.Context) ([]Volume, error) {
	var out VolumeList
	if err := c.do(ctx, http.MethodGet, "/v1/volumes", nil, nil, &out, "GET /v1/volumes"); err != nil {
		return nil, err
	}
	return out.Volumes, nil
}

// DefaultVolumeMount is where a volume is mounted when its entry names no
// mount.
func DefaultVolumeMount(name string) string { return "/volumes/" + name }

// ValidVolumeName reports whether name can be a catalog name: 1 to 63
// letters, digits, '.', '_' or '-', starting with a letter or digit, so the
// default mount is always one clean path element below /volumes.
func ValidVolumeName(name string) bool {
	if name == "" || len(name) > maxVolumeName {
		return false
	}
	for i, r := range name {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("._-", r)) {
			return false
		}
	}
	return true
}

// guestOSTree are the top-level guest directories a volume may not be
// mounted on or under: the operating system's programs and libraries
// (/bin, /sbin, /lib*, /usr), its configuration and state (/etc, /var,
// /boot), and the trees the kernel or the guest's init own (/dev, /proc,
// /sys, /run, /tmp). Shadowing any of them would break or subvert the
// guest rather than hand it data.
var guestOSTree = []string{
	"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32",
	"/proc", "/run", "/sbin", "/sys", "/tmp", "/usr", "/var",
}

// UnknownVolumeMessage is the one refusal for a volume name that is not in
// the catalog and one the caller may not use, so the answer never says
// whether a name exists.
func UnknownVolumeMessage(name string) string {
	return fmt.Sprintf("volume %.64q: unknown or forbidden", name)
}

// NormalizeVolumes checks a claim's volumes against the claim rules that do
// not need the catalog and returns them as applied: every mount filled in
// (none for attachOnly) and the read-only mode left empty. Its errors are
// the node's 400 messages.
func NormalizeVolumes(vols []VolumeMount, attachOnly bool) ([]VolumeMount, error) {
	if attachOnly && len(vols) == 0 {
		return nil, fmt.Errorf("volumes_attach_only needs at least one volume")
	}
	if len(vols) > MaxClaimVolumes {
		return nil, fmt.Errorf("at most %d volumes per claim", MaxClaimVolumes)
	}
	if len(vols) == 0 {
		return nil, nil
	}
	out := make([]VolumeMount, 0, len(vols))
	names := map[string]bool{}
	for _, v := range vols {
		if !ValidVolumeName(v.Name) {
			return nil, fmt.Errorf("%s", UnknownVolumeMessage(v.Name))
		}
		if names[v.Name] {
			return nil, fmt.Errorf("volume %q listed twice", v.Name)
		}
		names[v.Name] = true
		switch v.Mode {
		case "", VolumeModeRO:
			v.Mode = ""
		case VolumeModeRW:
		default:
			return nil, fmt.Errorf("volume %q: mode must be ro or rw", v.Name)
		}
		if attachOnly {
			if v.Mount != "" {
				return nil, fmt.Errorf("volume %q: volumes_attach_only entries carry no mount", v.Name)
			}
		} else {
			if v.Mount == "" {
				v.Mount = DefaultVolumeMount(v.Name)
			}
			if err := checkVolumeMount(v.Mount); err != nil {
				return nil, fmt.Errorf("volume %q: %w", v.Name, err)
			}
		}
		out = append(out, v)
	}
	for i, a := range out {
		for _, b := range out[i+1:] {
			if a.Mount == "" {
				break
			}
			if a.Mount == b.Mount || strings.HasPrefix(b.Mount, a.Mount+"/") || strings.HasPrefix(a.Mount, b.Mount+"/") {
				return nil, fmt.Errorf("volumes %q and %q: mounts %s and %s overlap", a.Name, b.Name, a.Mount, b.Mount)
			}
		}
	}
	return out, nil
}

// checkVolumeMount accepts an absolute, clean guest path outside the guest
// OS tree.
func checkVolumeMount(m string) error {
	// Control characters (NUL above all) name no path a mount can take.
	if strings.ContainsFunc(m, unicode.IsControl) || !path.IsAbs(m) || path.Clean(m) != m {
		return fmt.Errorf("mount %.256q must be an absolute, clean path", m)
	}
	if m == "/" {
		return fmt.Errorf("mount / would shadow the whole guest")
	}
	for _, dir := range guestOSTree {
		if m == dir || strings.HasPrefix(m, dir+"/") {
			return fmt.Errorf("mount %s is inside the guest OS tree (%s)", m, dir)
		}
	}
	return nil
}
