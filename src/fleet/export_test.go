package fleet

// NodeFanout is nodeFanout, for the test of the bound.
const NodeFanout = nodeFanout
