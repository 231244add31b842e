package e2b

import (
	"fmt"
	"net/http"

	"github.com/cocoonstack/sandbox-operator/src/e2b/wire"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Volumes are sandboxd's catalog: volumes the node operator declares in
// each node's config, which a claim may mount. There is no API to create,
// delete or write one, so the SDK's Volume.list lists the catalog, a
// create's volumeMounts become the claim's volumes, and the rest of the
// Volume API is refused with the reason (see unsupported).

// listVolumes is GET /volumes: the volumes of the fleet's catalog some
// node can mount now.
func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request, _ caller) {
	vols, err := s.fleet.Volumes(r.Context())
	if err != nil {
		s.fleetError(w, err, "read the volume catalog")
		return
	}
	out := make([]wire.VolumeListed, 0, len(vols))
	for _, v := range vols {
		if v.Available {
			out = append(out, wire.VolumeListed{VolumeID: v.Name, Name: v.Name})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// claimVolumes maps a create's volumeMounts to the claim's volumes: each
// name must be in the catalog, and a volume the catalog marks writable is
// mounted read-write (sandboxd then lets no other sandbox mount it while
// this one lives), any other read-only. The node checks the paths. ok is
// false when the answer was written.
func (s *Server) claimVolumes(w http.ResponseWriter, r *http.Request, mounts []wire.VolumeMount, src source) ([]sandboxd.VolumeMount, bool) {
	if len(mounts) == 0 {
		return nil, true
	}
	if src.Checkpoint != nil {
		writeError(w, http.StatusBadRequest, "a sandbox created from a snapshot cannot mount volumes: sandboxd branches a checkpoint with the volumes it had, none")
		return nil, false
	}
	catalog, err := s.fleet.Volumes(r.Context())
	if err != nil {
		s.fleetError(w, err, "read the volume catalog")
		return nil, false
	}
	writable := map[string]bool{}
	for _, v := range catalog {
		if v.Available {
			writable[v.Name] = v.Writable
		}
	}
	out := make([]sandboxd.VolumeMount, 0, len(mounts))
	for _, m := range mounts {
		rw, ok := writable[m.Name]
		if !ok {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("volume %q is not in the node operator's catalog (Volume.list shows what is)", m.Name))
			return nil, false
		}
		if m.Path == "" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("volume %q needs a path", m.Name))
			return nil, false
		}
		vm := sandboxd.VolumeMount{Name: m.Name, Mount: m.Path}
		if rw {
			vm.Mode = sandboxd.VolumeModeRW
		}
		out = append(out, vm)
	}
	return out, true
}
