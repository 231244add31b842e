package node

// FreezeInfo makes GET /v1/info keep answering what it answers now, while
// the pools underneath go on changing, until thaw is called. It is the lag
// of a real fleet, where warm counts reach the fronts by gossip and another
// front may take a node's last warm VM after they were counted: a front that
// trusts the frozen counts enters a node with nothing warm, and the node's
// redirect must rescue the claim.
func (n *Node) FreezeInfo() (thaw func()) {
	info := n.info()
	n.frozenInfo.Store(&info)
	return func() { n.frozenInfo.Store(nil) }
}
