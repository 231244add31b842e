package warmpool

import (
	"cmp"
	"encoding/binary"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// Place spreads replicas of the pool key over nodes as evenly as integers
// allow: every node gets replicas/len(nodes), and the remainder goes one
// each to the nodes that rank first for this key under rendezvous
// (highest-random-weight) hashing. The answer holds only nodes with a
// non-zero share.
//
// The ranking of two nodes against each other depends on the key and the
// two names alone, so adding a node never raises an existing node's share
// and removing one never lowers a remaining node's share: the replicas
// that move are exactly the joining node's share, or the leaving node's,
// which is the least any even spread can move. Different keys rank nodes
// differently, so remainders of many pools do not pile onto one node.
func Place(key sandbox.PoolKey, replicas int, nodes []string) map[string]int {
	if replicas <= 0 || len(nodes) == 0 {
		return nil
	}
	ranked := rank(key, nodes)
	base, extra := replicas/len(ranked), replicas%len(ranked)
	out := make(map[string]int, min(replicas, len(ranked)))
	for i, n := range ranked {
		share := base
		if i < extra {
			share++
		}
		if share > 0 {
			out[n] = share
		}
	}
	return out
}

// rank orders distinct node names by descending weight for key, breaking
// the (astronomically unlikely) ties by name so every replica agrees.
func rank(key sandbox.PoolKey, nodes []string) []string {
	type scored struct {
		name  string
		score uint64
	}
	seen := make(map[string]bool, len(nodes))
	list := make([]scored, 0, len(nodes))
	for _, n := range nodes {
		if seen[n] {
			continue
		}
		seen[n] = true
		list = append(list, scored{n, weight(key, n)})
	}
	slices.SortFunc(list, func(a, b scored) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s.name
	}
	return out
}

// weight is the rendezvous weight of node for key: a 64-bit FNV-1a hash of
// both, put through a 64-bit finalizer so that names differing in one
// trailing character still land far apart.
func weight(key sandbox.PoolKey, node string) uint64 {
	h := fnv.New64a()
	for _, part := range []string{key.Template, key.Net, key.Size, node} {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(part)))
		_, _ = h.Write(n[:])
		_, _ = h.Write([]byte(part))
	}
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}
