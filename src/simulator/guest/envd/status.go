package envd

import (
	"maps"
	"net/http"
	"runtime"
	"syscall"
)

// serveHealth is the unauthenticated liveness probe: 204, no body.
func (g *Guest) serveHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// serveEnvs reports the sandbox-wide environment variables.
func (g *Guest) serveEnvs(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, g.sandboxEnvs())
}

// sandboxEnvs is a snapshot of the sandbox-wide environment.
func (g *Guest) sandboxEnvs() map[string]string {
	g.envMu.RLock()
	defer g.envMu.RUnlock()
	return maps.Clone(g.envs)
}

// metrics is envd's resource-usage document. The simulator has no VM of its
// own, so memory and CPU describe the host and disk describes the
// filesystem holding the scratch directory.
type metrics struct {
	Timestamp   int64   `json:"ts"`
	CPUCount    int     `json:"cpu_count"`
	CPUUsedPct  float32 `json:"cpu_used_pct"`
	MemTotal    uint64  `json:"mem_total"`
	MemUsed     uint64  `json:"mem_used"`
	MemTotalMiB uint64  `json:"mem_total_mib"`
	MemUsedMiB  uint64  `json:"mem_used_mib"`
	DiskTotal   uint64  `json:"disk_total"`
	DiskUsed    uint64  `json:"disk_used"`
}

func (g *Guest) serveMetrics(w http.ResponseWriter, _ *http.Request) {
	m := metrics{Timestamp: g.cfg.Clock.Now().Unix(), CPUCount: runtime.NumCPU()}
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err == nil {
		unit := uint64(si.Unit)
		m.MemTotal = uint64(si.Totalram) * unit
		m.MemUsed = (uint64(si.Totalram) - uint64(si.Freeram)) * unit
		m.MemTotalMiB = m.MemTotal >> 20
		m.MemUsedMiB = m.MemUsed >> 20
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(g.cfg.Root, &fs); err == nil {
		bsize := uint64(fs.Bsize)
		m.DiskTotal = fs.Blocks * bsize
		m.DiskUsed = (fs.Blocks - fs.Bfree) * bsize
	}
	writeJSON(w, http.StatusOK, m)
}
