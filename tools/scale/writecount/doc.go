// Package writecount counts the writes the kube-apiserver and etcd took
// over a window, from their Prometheus /metrics: Read a Snapshot before
// and after, and Diff the two.
package writecount
