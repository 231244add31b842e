// Package peerwrites shares each sandbox-apiserver replica's recent writes
// with the other replicas, so that whatever one replica has answered every
// replica shows at once.
//
// Replicas read sandboxes from the NodeInventory objects the nodes publish
// (every 30 s with vk-sandbox), and each replica lays its own writes over
// that view until the nodes publish them. Without sharing, a client whose
// requests reach two replicas would see its create, kill or pause on one and
// not on the other until the next publish. Before a replica answers a write
// it therefore sends it to every peer (Sharer) and waits, within a bound,
// for each to acknowledge it; a peer lays the write over its own view
// exactly as the writer does (Handler), until the inventory confirms it.
//
// Nothing is written to the kube-apiserver: the writes travel replica to
// replica over plain HTTP, signed with a key every replica derives from the
// fleet's sandboxd token (DeriveKey), and carry no token. Peers are found
// from the EndpointSlices of the replicas' Service (EndpointSlicePeers),
// ready or not, so a replica starting up is told about writes before it
// takes traffic, or from a fixed list (StaticPeers).
package peerwrites
