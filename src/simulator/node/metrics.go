package node

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

type counter = atomic.Int64

// counters are the node's monotonic event counts.
type counters struct {
	claimsWarm, claimsClone, claimsCold  counter
	claimNanos                           counter
	redirects, refused                   counter
	releases, reaps, renews              counter
	hibernates, wakes, wakeNanos         counter
	forks, forkChildren                  counter
	checkpoints, checkpointClaims        counter
	promotes, templateClaims             counter
	sandboxGets, ownerLookups            counter
	relayRequests, relays                counter
	archives, unarchives, archiveDeletes counter
	vmmExits, vmmFailures                counter
}

// Counters is a snapshot of a node's event counts, for tests that assert
// how much traffic a node saw (e.g. how many per-id lookups a proxy's
// scatter cost each node).
type Counters struct {
	ClaimsWarm, ClaimsClone, ClaimsCold int64
	Redirects                           int64
	// Refused counts claims and forks answered 429.
	Refused                       int64
	Releases, Reaps, Renews       int64
	Hibernates, Wakes             int64
	Forks, ForkChildren           int64
	Checkpoints, CheckpointClaims int64
	// Promotes counts templates promoted (a re-promote too);
	// TemplateClaims the claims cloned from one.
	Promotes, TemplateClaims int64
	// SandboxGets counts GET /v1/sandboxes/{id} requests, any outcome.
	SandboxGets int64
	// OwnerLookups counts GET /v1/sandboxes/{id}/owner requests, any outcome.
	OwnerLookups int64
	// RelayRequests counts relay requests, any outcome; Relays those that
	// reached a guest.
	RelayRequests, Relays int64
	// Archives counts sandboxes archived at their deadline, Unarchives
	// those restored from the archive, ArchiveDeletes those deleted when
	// their retention ended.
	Archives, Unarchives, ArchiveDeletes int64
	// VMMExits counts claimed sandboxes whose machine died (vmm_exit),
	// VMMFailures those then parked as failed (vmm_failed).
	VMMExits, VMMFailures int64
}

// Counters returns the node's event counts.
func (n *Node) Counters() Counters {
	s := &n.stats
	return Counters{
		ClaimsWarm: s.claimsWarm.Load(), ClaimsClone: s.claimsClone.Load(), ClaimsCold: s.claimsCold.Load(),
		Redirects: s.redirects.Load(), Refused: s.refused.Load(),
		Releases: s.releases.Load(), Reaps: s.reaps.Load(), Renews: s.renews.Load(),
		Hibernates: s.hibernates.Load(), Wakes: s.wakes.Load(),
		Forks: s.forks.Load(), ForkChildren: s.forkChildren.Load(),
		Checkpoints: s.checkpoints.Load(), CheckpointClaims: s.checkpointClaims.Load(),
		Promotes: s.promotes.Load(), TemplateClaims: s.templateClaims.Load(),
		SandboxGets: s.sandboxGets.Load(), OwnerLookups: s.ownerLookups.Load(),
		RelayRequests: s.relayRequests.Load(), Relays: s.relays.Load(),
		Archives: s.archives.Load(), Unarchives: s.unarchives.Load(), ArchiveDeletes: s.archiveDeletes.Load(),
		VMMExits: s.vmmExits.Load(), VMMFailures: s.vmmFailures.Load(),
	}
}

// renderMetrics writes the Prometheus text exposition (format 0.0.4).
func (n *Node) renderMetrics() string {
	info := n.info()
	n.mu.Lock()
	tenantLive := make(map[string]int, len(n.tenantLive))
	for k, v := range n.tenantLive {
		tenantLive[k] = v
	}
	checkpoints, templates := len(n.checkpoints), len(n.templates)
	n.mu.Unlock()

	var b strings.Builder
	gauge := func(name, help string) { fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name) }
	count := func(name, help string) { fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n", name, help, name) }

	gauge("sandboxd_pool_warm", "Warm VMs ready to claim, per pool.")
	for _, p := range info.Pools {
		fmt.Fprintf(&b, "sandboxd_pool_warm{%s} %d\n", poolLabels(p.Key.Template, p.Key.Net, p.Key.Size), p.Warm)
	}
	gauge("sandboxd_pool_target", "Desired warm VMs, per pool.")
	for _, p := range info.Pools {
		fmt.Fprintf(&b, "sandboxd_pool_target{%s} %d\n", poolLabels(p.Key.Template, p.Key.Net, p.Key.Size), p.Target)
	}
	gauge("sandboxd_claimed", "Live claims on this node.")
	fmt.Fprintf(&b, "sandboxd_claimed %d\n", info.Claimed)
	gauge("sandboxd_hibernated", "Live claims whose VM is hibernated.")
	fmt.Fprintf(&b, "sandboxd_hibernated %d\n", info.Hibernated)
	gauge("sandboxd_archived", "Live claims archived off-node.")
	fmt.Fprintf(&b, "sandboxd_archived %d\n", info.Archived)
	gauge("sandboxd_failed", "Live claims whose VMM is down and was not restarted.")
	fmt.Fprintf(&b, "sandboxd_failed %d\n", info.Failed)
	gauge("sandboxd_draining", "1 while the node is cordoned.")
	fmt.Fprintf(&b, "sandboxd_draining %d\n", boolInt(info.Draining))
	gauge("sandboxd_checkpoints", "Checkpoint records held by this node.")
	fmt.Fprintf(&b, "sandboxd_checkpoints %d\n", checkpoints)
	gauge("sandboxd_templates", "Promoted templates held by this node.")
	fmt.Fprintf(&b, "sandboxd_templates %d\n", templates)

	gauge("sandboxd_tenant_claims", "Live claims per configured tenant.")
	names := make([]string, 0, len(n.cfg.Tenants))
	for _, t := range n.cfg.Tenants {
		names = append(names, t.Name)
	}
	slices.SortFunc(names, cmp.Compare)
	for _, name := range names {
		fmt.Fprintf(&b, "sandboxd_tenant_claims{tenant=\"%s\"} %d\n", escapeLabel(name), tenantLive[name])
	}

	c := n.Counters()
	count("sandboxd_claims_total", "Granted claims by tier.")
	fmt.Fprintf(&b, "sandboxd_claims_total{tier=\"warm\"} %d\n", c.ClaimsWarm)
	fmt.Fprintf(&b, "sandboxd_claims_total{tier=\"clone\"} %d\n", c.ClaimsClone)
	fmt.Fprintf(&b, "sandboxd_claims_total{tier=\"cold\"} %d\n", c.ClaimsCold)
	count("sandboxd_claim_seconds_total", "Time spent granting claims.")
	fmt.Fprintf(&b, "sandboxd_claim_seconds_total %g\n", time.Duration(n.stats.claimNanos.Load()).Seconds())
	count("sandboxd_wake_seconds_total", "Time spent waking sandboxes.")
	fmt.Fprintf(&b, "sandboxd_wake_seconds_total %g\n", time.Duration(n.stats.wakeNanos.Load()).Seconds())
	for _, m := range []struct {
		name, help string
		v          int64
	}{
		{"sandboxd_claim_redirects_total", "Claims answered with a peer redirect.", c.Redirects},
		{"sandboxd_claims_refused_total", "Claims and forks refused with 429.", c.Refused},
		{"sandboxd_releases_total", "Sandboxes released.", c.Releases},
		{"sandboxd_reaps_total", "Sandboxes reaped at their deadline.", c.Reaps},
		{"sandboxd_renews_total", "Leases renewed.", c.Renews},
		{"sandboxd_hibernates_total", "Sandboxes hibernated.", c.Hibernates},
		{"sandboxd_wakes_total", "Sandboxes woken.", c.Wakes},
		{"sandboxd_archives_total", "Sandboxes archived at their deadline.", c.Archives},
		{"sandboxd_unarchives_total", "Archived sandboxes restored.", c.Unarchives},
		{"sandboxd_archive_deletes_total", "Archived sandboxes deleted when their retention ended.", c.ArchiveDeletes},
		{"sandboxd_forks_total", "Fork calls served.", c.Forks},
		{"sandboxd_fork_children_total", "Sandboxes created by forks.", c.ForkChildren},
		{"sandboxd_checkpoints_total", "Checkpoints created.", c.Checkpoints},
		{"sandboxd_checkpoint_claims_total", "Claims branched from checkpoints.", c.CheckpointClaims},
		{"sandboxd_promotes_total", "Templates promoted.", c.Promotes},
		{"sandboxd_template_claims_total", "Claims cloned from promoted templates.", c.TemplateClaims},
		{"sandboxd_sim_sandbox_gets_total", "GET /v1/sandboxes/{id} requests received.", c.SandboxGets},
		{"sandboxd_sim_owner_lookups_total", "GET /v1/sandboxes/{id}/owner requests received.", c.OwnerLookups},
		{"sandboxd_sim_relay_requests_total", "Guest-port relay requests received.", c.RelayRequests},
		{"sandboxd_sim_relays_total", "Guest-port relays established.", c.Relays},
		{"sandboxd_sim_vmm_exits_total", "Claimed sandboxes whose machine died (vmm_exit).", c.VMMExits},
		{"sandboxd_sim_vmm_failures_total", "Sandboxes parked as failed after their machine died (vmm_failed).", c.VMMFailures},
	} {
		count(m.name, m.help)
		fmt.Fprintf(&b, "%s %d\n", m.name, m.v)
	}
	return b.String()
}

func poolLabels(template, net, size string) string {
	return fmt.Sprintf("template=\"%s\",net=\"%s\",size=\"%s\"", escapeLabel(template), escapeLabel(net), escapeLabel(size))
}

// escapeLabel escapes a label value per the text exposition format.
func escapeLabel(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
