// Package simfleet runs N simulated sandboxd nodes on loopback as one mesh:
// each node has its own port and name and sees the others as peers, so
// claims redirect between them the way a real cluster's do. Tests start a
// fleet in-process with Start; cmd/sandboxd-sim wraps it in a binary.
package simfleet
