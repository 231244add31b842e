package writecount

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"k8s.io/client-go/rest"
)

// fakeMetrics serves a kube-apiserver's and an etcd's /metrics; either
// may be replaced to count, or fail, between two reads.
type fakeMetrics struct {
	kube, etcd string
	etcdStatus int
}

func (f *fakeMetrics) servers(t *testing.T) (rest.Interface, string) {
	t.Helper()
	serve := func(body func() (int, string)) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/metrics" {
				http.NotFound(w, r)
				return
			}
			code, b := body()
			w.WriteHeader(code)
			_, _ = w.Write([]byte(b))
		}))
		t.Cleanup(s.Close)
		return s
	}
	kube := serve(func() (int, string) { return http.StatusOK, f.kube })
	etcd := serve(func() (int, string) {
		if f.etcdStatus != 0 {
			return f.etcdStatus, ""
		}
		return http.StatusOK, f.etcd
	})
	u, err := url.Parse(kube.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rest.NewRESTClient(u, "", rest.ClientContentConfig{}, nil, kube.Client())
	if err != nil {
		t.Fatal(err)
	}
	return c, etcd.URL
}

func TestReadDiff(t *testing.T) {
	f := &fakeMetrics{
		kube: `apiserver_request_total{resource="pods",subresource="",verb="POST"} 1
apiserver_request_total{resource="pods",subresource="",verb="GET"} 50
etcd_requests_total{group="",operation="create",resource="pods"} 1
etcd_requests_total{group="",operation="get",resource="pods"} 7
`,
		etcd: "etcd_mvcc_put_total 10\netcd_mvcc_txn_total 3\n",
	}
	kube, etcdURL := f.servers(t)
	ctx := context.Background()
	before, err := Read(ctx, kube, etcdURL)
	if err != nil {
		t.Fatal(err)
	}
	f.kube = `apiserver_request_total{resource="pods",subresource="",verb="POST"} 4
apiserver_request_total{resource="pods",subresource="status",verb="PATCH"} 2
apiserver_request_total{resource="pods",subresource="",verb="GET"} 90
etcd_requests_total{group="",operation="create",resource="pods"} 4
etcd_requests_total{group="",operation="update",resource="pods"} 2
etcd_requests_total{group="agents.x-k8s.io",operation="create",resource="sandboxes"} 1
etcd_requests_total{group="",operation="get",resource="pods"} 20
`
	f.etcd = "etcd_mvcc_put_total 16\netcd_mvcc_txn_total 5\netcd_mvcc_delete_total 1\n"
	after, err := Read(ctx, kube, etcdURL)
	if err != nil {
		t.Fatal(err)
	}
	d := Diff(before, after)
	if d.APIWrites != 5 || d.APIWritesByResource["pods"] != 3 || d.APIWritesByResource["pods/status"] != 2 {
		t.Errorf("api writes %v %v, want 5: pods 3, pods/status 2", d.APIWrites, d.APIWritesByResource)
	}
	if d.EtcdWrites != 6 || d.EtcdWritesByType["pods"] != 5 || d.EtcdWritesByType["sandboxes.agents.x-k8s.io"] != 1 {
		t.Errorf("etcd writes %v %v, want 6: pods 5, sandboxes.agents.x-k8s.io 1", d.EtcdWrites, d.EtcdWritesByType)
	}
	if d.EtcdRequestsByOperation["get"] != 13 {
		t.Errorf("etcd requests %v, want get 13", d.EtcdRequestsByOperation)
	}
	if d.EtcdPuts != 6 || d.EtcdTxns != 2 || d.EtcdDeletes != 1 {
		t.Errorf("mvcc puts %v txns %v deletes %v, want 6 2 1", d.EtcdPuts, d.EtcdTxns, d.EtcdDeletes)
	}
	if d.Seconds < 0 || d.Seconds != after.Time().Sub(before.Time()).Seconds() {
		t.Errorf("seconds %v, times %v then %v", d.Seconds, before.Time(), after.Time())
	}
}

func TestReadEtcdFailure(t *testing.T) {
	f := &fakeMetrics{etcdStatus: http.StatusInternalServerError}
	kube, etcdURL := f.servers(t)
	if _, err := Read(context.Background(), kube, etcdURL); err == nil {
		t.Error("Read succeeded with etcd's /metrics failing")
	}
}
