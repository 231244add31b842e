package fill

import (
	"maps"
	"testing"

	"github.com/cocoonstack/sandbox-operator/tools/scale/stats"
)

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

func TestParseWrites(t *testing.T) {
	w, err := parseWrites([]byte(exposition))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"namespaces":              3,
		"sandboxwarmpools/status": 7,
		"sandboxwarmpools":        2,
		"nodeinventories":         1200,
		"leases":                  5,
		"events":                  5,
	}
	if !maps.Equal(w.ByResource, want) {
		t.Errorf("by resource %v, want %v", w.ByResource, want)
	}
	if w.Total != 1222 {
		t.Errorf("total %d, want 1222", w.Total)
	}
}

func TestParseWritesRejectsABrokenSample(t *testing.T) {
	for _, line := range []string{
		`apiserver_request_total{verb="POST",resource="x" 3`,
		`apiserver_request_total{verb="POST,resource="x"} 3`,
		`apiserver_request_total{verb=POST} 3`,
		`apiserver_request_total{verb="POST"}`,
		`apiserver_request_total{verb="POST"} three`,
	} {
		if _, err := parseWrites([]byte(line + "\n")); err == nil {
			t.Errorf("%s: parsed", line)
		}
	}
}

func TestParseSampleUnescapes(t *testing.T) {
	labels, v, err := parseSample(`{a="x,y",b="say \"hi\"\n",c="back\\slash"} 2.5`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "x,y", "b": "say \"hi\"\n", "c": `back\slash`}
	if !maps.Equal(labels, want) || v != 2.5 {
		t.Errorf("got %q %v, want %q 2.5", labels, v, want)
	}
}

func TestWritesMinus(t *testing.T) {
	before := Writes{Total: 10, ByResource: map[string]int{"a": 4, "b": 6}}
	after := Writes{Total: 17, ByResource: map[string]int{"a": 4, "b": 9, "c": 4}}
	got := after.Minus(before)
	if got.Total != 7 || !maps.Equal(got.ByResource, map[string]int{"b": 3, "c": 4}) {
		t.Errorf("got %+v", got)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := stats.Median(tc.in); got != tc.want {
			t.Errorf("stats.Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestShareRange(t *testing.T) {
	lo, hi := shareRange(map[string]int{"a": 3, "b": 2}, []string{"a", "b", "c"})
	if lo != 0 || hi != 3 {
		t.Errorf("got %d..%d, want 0..3", lo, hi)
	}
}
