package fleet

// NodeFanout is nodeFanout, for the test of the bound.
const NodeFanout = nodeFanout

// OrphanMaxWait is orphanMaxWait: stepping a fake clock by it fires any
// background retry's wait.
const OrphanMaxWait = orphanMaxWait
