// Package inventory is the read side of the fleet: an informer-backed,
// read-only, indexed view of the NodeInventory objects the sandbox nodes
// publish, with the freshness rule every reading binary shares.
//
// A Store consumes a cache.SharedIndexInformer over
// nodeinventories.sandbox.cocoonstack.io (typed *v1beta1.NodeInventory or
// *unstructured.Unstructured objects both work, so a dynamic informer is
// enough). It keeps only fresh nodes in its indexes and answers lookups by
// claim reference, by sandboxd id (either spelling) and by namespace without
// scanning, and tells subscribers about every entry that appears, changes or
// disappears, including when a node turns stale or fresh again by the mere
// passage of time.
//
// # Freshness
//
// A node's age is its publishedAt measured against the newest publishedAt
// among all inventories the store holds, capped by the process clock:
//
//	newest = min(max(publishedAt over nodes), now)
//	stale  = newest - publishedAt > StaleAfter
//
// Measuring against the fleet instead of the wall clock means a
// control-plane write outage, which freezes every stamp together, never
// empties the fleet, and a fleet whose nodes all stop publishing keeps its
// last inventory. The cap means one node whose clock runs ahead cannot
// evict the others. An inventory without publishedAt is stale as soon as
// any node stamps one; in a fleet where none does, every node is kept.
package inventory
