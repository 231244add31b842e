// Package records keeps what an e2b create chose that the fleet's view
// of a sandbox cannot tell: the caller's metadata, the alias it named,
// its internet choice, auto-pause and auto-resume, and an anonymous
// caller's source address. The truth rides on the sandbox's sandboxd
// claim as labels (Labels, FromLabels), fixed at claim time and listed by
// its node, so every replica reads the same record and losing one loses
// nothing; Store caches records per process, bounded, and reads a
// sandbox another replica created off its node's index.
package records
