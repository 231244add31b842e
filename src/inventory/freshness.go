package inventory

import "time"

// freshNodes applies the freshness rule (see the package comment) to the
// publishedAt of every known node, zero meaning the inventory carries none,
// and returns the set of fresh node names.
func freshNodes(stamps map[string]time.Time, now time.Time, staleAfter time.Duration) map[string]bool {
	var newest time.Time
	for _, p := range stamps {
		if p.After(newest) {
			newest = p
		}
	}
	fresh := make(map[string]bool, len(stamps))
	if newest.IsZero() {
		// Nobody stamps: an old CRD or old publishers. Keep every node
		// rather than serve an empty fleet.
		for name := range stamps {
			fresh[name] = true
		}
		return fresh
	}
	if newest.After(now) {
		// A node whose clock runs ahead must not make the others look old.
		newest = now
	}
	for name, p := range stamps {
		if !p.IsZero() && newest.Sub(p) <= staleAfter {
			fresh[name] = true
		}
	}
	return fresh
}
