package writecount

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// Snapshot is the cumulative write counters of the kube-apiserver and
// etcd at one moment; only the Diff of two means anything.
type Snapshot struct {
	at time.Time
	// apiWrites is apiserver_request_total of the write verbs by resource
	// (subresources as resource/subresource).
	apiWrites map[string]float64
	// etcdRequests is the kube-apiserver's etcd_requests_total by
	// operation (create, update, delete, get, list, ...), over all types.
	etcdRequests map[string]float64
	// etcdWritesByType is etcd_requests_total of create, update and
	// delete by stored resource (resource.group).
	etcdWritesByType map[string]float64
	// mvcc is etcd's own etcd_mvcc_{put,delete,txn,range}_total.
	mvcc map[string]float64
}

// Time is when s was read, for a caller that sizes its next window from
// the start of this one.
func (s Snapshot) Time() time.Time { return s.at }

// writeVerbs are the apiserver_request_total verbs that write.
var writeVerbs = map[string]bool{
	"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "DELETECOLLECTION": true,
	"APPLY": true, "CREATE": true, "UPDATE": true,
}

// etcdWriteOps are the etcd_requests_total operations that write.
var etcdWriteOps = map[string]bool{"create": true, "update": true, "delete": true}

// Read scrapes the kube-apiserver's /metrics through kubeAPIServer (a
// client allowed to read them, such as the admin's) and etcd's at
// etcdURL, which serves them over plain HTTP.
func Read(ctx context.Context, kubeAPIServer rest.Interface, etcdURL string) (Snapshot, error) {
	w := Snapshot{
		at:               time.Now(),
		apiWrites:        map[string]float64{},
		etcdRequests:     map[string]float64{},
		etcdWritesByType: map[string]float64{},
		mvcc:             map[string]float64{},
	}
	raw, err := kubeAPIServer.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return w, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	w.apiWrites = APIWrites(raw)
	EachSample(raw, func(name, labels string, v float64) {
		switch name {
		case "etcd_requests_total":
			op := Label(labels, "operation")
			w.etcdRequests[op] += v
			if etcdWriteOps[op] {
				res := Label(labels, "resource")
				if g := Label(labels, "group"); g != "" {
					res += "." + g
				}
				w.etcdWritesByType[res] += v
			}
		}
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, etcdURL+"/metrics", nil)
	if err != nil {
		return w, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return w, fmt.Errorf("etcd /metrics: %w", err)
	}
	defer resp.Body.Close()
	raw, err = io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return w, fmt.Errorf("etcd /metrics: %s %v", resp.Status, err)
	}
	EachSample(raw, func(name, _ string, v float64) {
		switch name {
		case "etcd_mvcc_put_total", "etcd_mvcc_delete_total", "etcd_mvcc_txn_total", "etcd_mvcc_range_total":
			w.mvcc[strings.TrimPrefix(name, "etcd_mvcc_")] += v
		}
	})
	return w, nil
}

// APIWrites sums the write requests in a kube-apiserver's /metrics
// exposition (apiserver_request_total with a writing verb), by
// "resource" or "resource/subresource" (e.g. "sandboxwarmpools/status").
func APIWrites(exposition []byte) map[string]float64 {
	out := map[string]float64{}
	EachSample(exposition, func(name, labels string, v float64) {
		if name != "apiserver_request_total" || !writeVerbs[Label(labels, "verb")] {
			return
		}
		res := Label(labels, "resource")
		if sub := Label(labels, "subresource"); sub != "" {
			res += "/" + sub
		}
		out[res] += v
	})
	return out
}

// WriteCounts is a difference of two Snapshots (or a scaled one), in the
// shape results files hold it.
type WriteCounts struct {
	Seconds float64 `json:"seconds"`
	// APIWrites is the kube-apiserver's write requests (all resources),
	// APIWritesByResource split by resource.
	APIWrites           float64            `json:"apiWrites"`
	APIWritesByResource map[string]float64 `json:"apiWritesByResource,omitempty"`
	// EtcdWrites is the kube-apiserver's etcd create+update+delete
	// requests, EtcdWritesByType split by stored resource,
	// EtcdRequestsByOperation every operation.
	EtcdWrites              float64            `json:"etcdWrites"`
	EtcdWritesByType        map[string]float64 `json:"etcdWritesByType,omitempty"`
	EtcdRequestsByOperation map[string]float64 `json:"etcdRequestsByOperation,omitempty"`
	// EtcdPuts, EtcdDeletes and EtcdTxns are etcd's own MVCC counters
	// (etcd_mvcc_put_total, _delete_total, _txn_total).
	EtcdPuts    float64 `json:"etcdPuts"`
	EtcdDeletes float64 `json:"etcdDeletes"`
	EtcdTxns    float64 `json:"etcdTxns"`
}

// Diff is after minus before.
func Diff(before, after Snapshot) WriteCounts {
	d := WriteCounts{
		Seconds:                 after.at.Sub(before.at).Seconds(),
		APIWritesByResource:     subMap(after.apiWrites, before.apiWrites),
		EtcdWritesByType:        subMap(after.etcdWritesByType, before.etcdWritesByType),
		EtcdRequestsByOperation: subMap(after.etcdRequests, before.etcdRequests),
		EtcdPuts:                after.mvcc["put_total"] - before.mvcc["put_total"],
		EtcdDeletes:             after.mvcc["delete_total"] - before.mvcc["delete_total"],
		EtcdTxns:                after.mvcc["txn_total"] - before.mvcc["txn_total"],
	}
	for _, v := range d.APIWritesByResource {
		d.APIWrites += v
	}
	for _, v := range d.EtcdWritesByType {
		d.EtcdWrites += v
	}
	return d
}

// Scaled is w with every count multiplied by f, over seconds: an idle
// window stretched to another's length, or a total split per object.
func (w WriteCounts) Scaled(f, seconds float64) WriteCounts {
	return WriteCounts{
		Seconds:                 seconds,
		APIWrites:               w.APIWrites * f,
		APIWritesByResource:     scaleMap(w.APIWritesByResource, f),
		EtcdWrites:              w.EtcdWrites * f,
		EtcdWritesByType:        scaleMap(w.EtcdWritesByType, f),
		EtcdRequestsByOperation: scaleMap(w.EtcdRequestsByOperation, f),
		EtcdPuts:                w.EtcdPuts * f,
		EtcdDeletes:             w.EtcdDeletes * f,
		EtcdTxns:                w.EtcdTxns * f,
	}
}

// Minus is w - o, field by field, keeping w's Seconds: what a window
// wrote beyond the background (o).
func (w WriteCounts) Minus(o WriteCounts) WriteCounts {
	return WriteCounts{
		Seconds:                 w.Seconds,
		APIWrites:               w.APIWrites - o.APIWrites,
		APIWritesByResource:     subMap(w.APIWritesByResource, o.APIWritesByResource),
		EtcdWrites:              w.EtcdWrites - o.EtcdWrites,
		EtcdWritesByType:        subMap(w.EtcdWritesByType, o.EtcdWritesByType),
		EtcdRequestsByOperation: subMap(w.EtcdRequestsByOperation, o.EtcdRequestsByOperation),
		EtcdPuts:                w.EtcdPuts - o.EtcdPuts,
		EtcdDeletes:             w.EtcdDeletes - o.EtcdDeletes,
		EtcdTxns:                w.EtcdTxns - o.EtcdTxns,
	}
}

// subMap is a - b over the keys of both, dropping zeros.
func subMap(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range a {
		out[k] = v - b[k]
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			out[k] = -v
		}
	}
	for k, v := range out {
		if v == 0 {
			delete(out, k)
		}
	}
	return out
}

func scaleMap(m map[string]float64, f float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = v * f
	}
	return out
}

// EachSample calls fn for every sample line of a Prometheus text
// exposition: the metric name, the raw label set (without braces) and the
// value.
func EachSample(raw []byte, fn func(name, labels string, v float64)) {
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		var name, labels, rest string
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			name, labels, rest = line[:i], line[i+1:j], line[j+1:]
		} else {
			var ok bool
			if name, rest, ok = strings.Cut(line, " "); !ok {
				continue
			}
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		fn(name, labels, v)
	}
}

// Label returns the value of name in a Prometheus label set as EachSample
// passes it. It splits on commas and ignores escapes, which is enough for
// the labels the kube-apiserver and etcd write counters carry.
func Label(labels, name string) string {
	for _, kv := range strings.Split(labels, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.TrimSpace(k) == name {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}
