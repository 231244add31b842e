package writecount

import (
	"maps"
	"testing"
	"time"
)

func TestEachSampleAndLabel(t *testing.T) {
	raw := []byte(`# HELP apiserver_request_total x
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1"} 100
etcd_mvcc_put_total 42
`)
	var got []string
	EachSample(raw, func(name, labels string, v float64) {
		got = append(got, name+"|"+Label(labels, "verb")+"|"+Label(labels, "subresource"))
	})
	want := []string{"apiserver_request_total|POST|", "apiserver_request_total|PATCH|status", "apiserver_request_total|GET|", "etcd_mvcc_put_total||"}
	if len(got) != len(want) {
		t.Fatalf("samples %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("sample %d: %q, want %q", i, got[i], want[i])
		}
	}
}

func TestDiffScaleMinus(t *testing.T) {
	t0 := time.Unix(100, 0)
	a := Snapshot{at: t0, apiWrites: map[string]float64{"pods": 1}, etcdRequests: map[string]float64{"update": 5}, etcdWritesByType: map[string]float64{"pods": 5}, mvcc: map[string]float64{"put_total": 10, "txn_total": 20}}
	b := Snapshot{at: t0.Add(2 * time.Second), apiWrites: map[string]float64{"pods": 5, "nodeinventories": 4}, etcdRequests: map[string]float64{"update": 9}, etcdWritesByType: map[string]float64{"pods": 9}, mvcc: map[string]float64{"put_total": 18, "txn_total": 30}}
	d := Diff(a, b)
	if d.Seconds != 2 || d.APIWrites != 8 || d.APIWritesByResource["nodeinventories"] != 4 || d.EtcdWrites != 4 || d.EtcdPuts != 8 || d.EtcdTxns != 10 {
		t.Errorf("Diff = %+v", d)
	}
	s := d.Scaled(0.5, 1)
	if s.Seconds != 1 || s.APIWrites != 4 || s.EtcdPuts != 4 || s.APIWritesByResource["pods"] != 2 {
		t.Errorf("Scaled = %+v", s)
	}
	n := d.Minus(s)
	if n.APIWrites != 4 || n.EtcdPuts != 4 || n.APIWritesByResource["nodeinventories"] != 2 {
		t.Errorf("Minus = %+v", n)
	}
}

const exposition = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="namespaces",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="namespaces",scope="cluster",subresource="",verb="LIST",version="v1"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="extensions.agents.x-k8s.io",resource="sandboxwarmpools",scope="resource",subresource="status",verb="PUT",version="v1beta1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="extensions.agents.x-k8s.io",resource="sandboxwarmpools",scope="resource",subresource="",verb="PATCH",version="v1beta1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="sandbox.cocoonstack.io",resource="nodeinventories",scope="resource",subresource="",verb="APPLY",version="v1beta1"} 1.2e+03
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 5 1700000000000
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="events",scope="namespace",subresource="",verb="DELETECOLLECTION",version="v1"} 1
apiserver_request_total{code="201",component="apiserver",dry_run="",group="events.k8s.io",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 4
apiserver_request_total_other{verb="POST",resource="x"} 100
apiserver_request_duration_seconds_bucket{verb="POST",resource="x",le="0.1"} 100
`

func TestAPIWrites(t *testing.T) {
	got := APIWrites([]byte(exposition))
	want := map[string]float64{
		"namespaces":              3,
		"sandboxwarmpools/status": 7,
		"sandboxwarmpools":        2,
		"nodeinventories":         1200,
		"leases":                  5,
		"events":                  5,
	}
	if !maps.Equal(got, want) {
		t.Errorf("by resource %v, want %v", got, want)
	}
}
