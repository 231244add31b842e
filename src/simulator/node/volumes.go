package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
)

// Volume is one entry of a node's dataset-volume catalog. sandboxd backs an
// entry with a disk image it attaches to the VM; the simulator backs it with
// a host directory, which an isolated machine (Config.Isolation) sees
// bind-mounted at the claim's mount path.
type Volume struct {
	// Name is the catalog name (sandboxd.ValidVolumeName).
	Name string
	// Dir is the absolute host directory standing in for the image.
	Dir string
	// Writable lets claims attach the volume "rw".
	Writable bool
	// Tenants, when non-empty, is the access list: only these tenants (and
	// root) may see and claim the volume.
	Tenants []string
}

// validateCatalog checks Config.Volumes.
func validateCatalog(vols []Volume) error {
	seen := map[string]bool{}
	for _, v := range vols {
		if !sandboxd.ValidVolumeName(v.Name) {
			return fmt.Errorf("node: volume name %q: want 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit", v.Name)
		}
		if seen[v.Name] {
			return fmt.Errorf("node: volume %q declared twice", v.Name)
		}
		seen[v.Name] = true
		if !filepath.IsAbs(v.Dir) {
			return fmt.Errorf("node: volume %q: directory %q is not absolute", v.Name, v.Dir)
		}
		if fi, err := os.Stat(v.Dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("node: volume %q: %q is not a directory", v.Name, v.Dir)
		}
		for _, t := range v.Tenants {
			if t == "" {
				return fmt.Errorf("node: volume %q: empty tenant in the access list", v.Name)
			}
		}
	}
	return nil
}

// volumeHolds records who holds each catalog name: name → holder → rw.
// A holder is a live sandbox (its id) or a claim still being made (a
// reservation key), so admission of concurrent claims sees each other.
// Keyed by holder, dropping a hold twice is harmless. Guarded by Node.mu.
type volumeHolds map[string]map[string]bool

// permits reports whether c may see and claim v; unknown and forbidden
// names must read the same to a tenant.
func (v *Volume) permits(c caller) bool {
	if c.kind != callerTenant || len(v.Tenants) == 0 {
		return true
	}
	return slices.Contains(v.Tenants, c.tenant)
}

func (n *Node) catalogEntry(name string) *Volume {
	for i := range n.cfg.Volumes {
		if n.cfg.Volumes[i].Name == name {
			return &n.cfg.Volumes[i]
		}
	}
	return nil
}

// resolveVolumes applies the claim rules to a claim's volumes: the
// catalog-free rules (sandboxd.NormalizeVolumes), then the catalog's: a
// name the caller may use, "rw" only on a writable entry.
func (n *Node) resolveVolumes(c caller, req []sandboxd.VolumeMount, attachOnly bool) ([]sandboxd.VolumeMount, *apiError) {
	vols, err := sandboxd.NormalizeVolumes(req, attachOnly)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "%s", err)
	}
	for _, v := range vols {
		entry := n.catalogEntry(v.Name)
		if entry == nil || !entry.permits(c) {
			return nil, errorf(http.StatusBadRequest, "%s", sandboxd.UnknownVolumeMessage(v.Name))
		}
		if v.Mode == sandboxd.VolumeModeRW && !entry.Writable {
			return nil, errorf(http.StatusBadRequest, "volume %q is not writable", v.Name)
		}
	}
	return vols, nil
}

// holdVolumesLocked admits holder's volumes under the busy rules (a writer
// excludes every other holder of the name, readers exclude a writer) and
// records the holds, or records nothing and answers 409.
func (n *Node) holdVolumesLocked(holder string, vols []sandboxd.VolumeMount) *apiError {
	if n.volumeHolds == nil {
		n.volumeHolds = volumeHolds{}
	}
	for _, v := range vols {
		for other, rw := range n.volumeHolds[v.Name] {
			if other != holder && (rw || v.Mode == sandboxd.VolumeModeRW) {
				return errorf(http.StatusConflict, "volume %q busy", v.Name)
			}
		}
	}
	for _, v := range vols {
		if n.volumeHolds[v.Name] == nil {
			n.volumeHolds[v.Name] = map[string]bool{}
		}
		n.volumeHolds[v.Name][holder] = v.Mode == sandboxd.VolumeModeRW
	}
	return nil
}

// dropVolumesLocked ends holder's holds.
func (n *Node) dropVolumesLocked(holder string, vols []sandboxd.VolumeMount) {
	for _, v := range vols {
		delete(n.volumeHolds[v.Name], holder)
		if len(n.volumeHolds[v.Name]) == 0 {
			delete(n.volumeHolds, v.Name)
		}
	}
}

// claimWithVolumes makes a claim whose volumes resolveVolumes applied: it
// holds them for the claim while it is made (the sandbox it makes holds
// them from then on, until it is removed) and drops that reservation
// whatever the outcome.
func (n *Node) claimWithVolumes(ctx context.Context, c caller, req sandboxd.ClaimRequest) (sandboxd.ClaimResponse, *apiError) {
	if len(req.Volumes) == 0 {
		return n.claim(ctx, c, req)
	}
	// A volume claim is served here or not at all: a peer's catalog may
	// lack the name, and the simulator's mesh does not rank peers by
	// volume (sandboxd's fleet-wide placement rule).
	req.NoRedirect = true
	reservation := "claim:" + randomHex(8)
	n.mu.Lock()
	aerr := n.holdVolumesLocked(reservation, req.Volumes)
	n.mu.Unlock()
	if aerr != nil {
		return sandboxd.ClaimResponse{}, aerr
	}
	defer func() {
		n.mu.Lock()
		n.dropVolumesLocked(reservation, req.Volumes)
		n.mu.Unlock()
	}()
	return n.claim(ctx, c, req)
}

// adoptVolumesLocked makes a new sandbox the holder of its volumes (the
// claim's reservation already admitted them).
func (n *Node) adoptVolumesLocked(sb *claimed) {
	if len(sb.volumes) == 0 {
		return
	}
	if n.volumeHolds == nil {
		n.volumeHolds = volumeHolds{}
	}
	for _, v := range sb.volumes {
		if n.volumeHolds[v.Name] == nil {
			n.volumeHolds[v.Name] = map[string]bool{}
		}
		n.volumeHolds[v.Name][sb.id] = v.Mode == sandboxd.VolumeModeRW
	}
}

// warmFits reports whether a warm VM can serve the claim. An isolated
// machine's mounts are fixed when it starts (its mount namespace is
// private), so a claim that mounts volumes boots its own machine instead;
// an attach-only claim mounts nothing and takes a warm one.
func (n *Node) warmFits(req sandboxd.ClaimRequest) bool {
	return n.cfg.Isolation == nil || len(req.Volumes) == 0 || req.VolumesAttachOnly
}

// machineMounts are the binds an isolated machine of a claim with vols
// starts with. An attach-only entry has no mount: sandboxd would hand the
// guest a block device, and the simulator has none to hand, so nothing of
// it appears in the guest.
func (n *Node) machineMounts(vols []sandboxd.VolumeMount) []isolate.Mount {
	var out []isolate.Mount
	for _, v := range vols {
		entry := n.catalogEntry(v.Name)
		if v.Mount == "" || entry == nil {
			continue
		}
		out = append(out, isolate.Mount{Source: entry.Dir, Target: v.Mount, ReadOnly: v.Mode != sandboxd.VolumeModeRW})
	}
	return out
}

// VolumeNames lists the node's catalog names; a mesh peer of the same
// process reads it to count the members declaring a name.
func (n *Node) VolumeNames() []string {
	out := make([]string, len(n.cfg.Volumes))
	for i, v := range n.cfg.Volumes {
		out[i] = v.Name
	}
	return out
}

// volumeCatalog is a peer whose catalog this node can read. Only the nodes
// of the same process (package fleet) are: the gossip between processes
// (package gossip) carries membership, warm counts and templates but no
// catalogs, so a member of another process is not counted in nodes.
type volumeCatalog interface {
	VolumeNames() []string
}

func (n *Node) handleVolumes(w http.ResponseWriter, r *http.Request) {
	c, ok := n.nodeCaller(w, r)
	if !ok {
		return
	}
	declared := map[string]int{} // name → members declaring it, self included
	for _, v := range n.cfg.Volumes {
		declared[v.Name] = 1
	}
	var peerOnly []string
	if n.cfg.Mesh != nil {
		for _, p := range n.cfg.Mesh.Peers(n) {
			cat, ok := p.(volumeCatalog)
			if !ok {
				continue
			}
			for _, name := range cat.VolumeNames() {
				if declared[name] == 0 {
					peerOnly = append(peerOnly, name)
				}
				declared[name]++
			}
		}
	}
	out := []sandboxd.Volume{}
	for i := range n.cfg.Volumes {
		v := &n.cfg.Volumes[i]
		if !v.permits(c) {
			continue
		}
		size, err := treeSize(v.Dir)
		out = append(out, sandboxd.Volume{
			Name: v.Name, DefaultMount: sandboxd.DefaultVolumeMount(v.Name),
			SizeBytes: size, Available: err == nil, Nodes: declared[v.Name], Writable: v.Writable,
		})
	}
	// Peer-only names are part of root's fleet view only: a tenant sees
	// what this node declares and its access list permits.
	if c.operator() {
		for _, name := range peerOnly {
			out = append(out, sandboxd.Volume{Name: name, DefaultMount: sandboxd.DefaultVolumeMount(name), Nodes: declared[name]})
		}
	}
	slices.SortFunc(out, func(a, b sandboxd.Volume) int { return cmp.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, sandboxd.VolumeList{Volumes: out})
}

// treeSize is the best-effort size of a volume: the bytes of the regular
// files under dir. An error means the directory cannot be read, i.e. the
// "image" is not available.
func treeSize(dir string) (int64, error) {
	var size int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				return nil // a part this process cannot read; count the rest
			}
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				size += fi.Size()
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("volume dir %s: %w", dir, err)
	}
	return size, nil
}
