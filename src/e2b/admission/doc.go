// Package admission holds the per-client and per-namespace bounds of the
// e2b surface, apart from the HTTP handlers that apply them: the create
// rate and live-sandbox cap (CreateGate), the lock that makes a
// namespace's quota check and the work it admits one step (KeyedLock),
// the uploads still being written that a store cannot count yet
// (UploadsInFlight), and what one snapshot counts against a namespace's
// bytes (SnapshotBound). Nothing here writes an answer or reads the
// fleet: the surface lists what exists, this package decides whether one
// more fits, so the bounds can be tested without a server.
package admission
