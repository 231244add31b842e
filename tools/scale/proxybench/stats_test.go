package proxybench

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/tools/scale/stats"
)

func TestPercentileNearestRank(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{
		{50, 50 * time.Millisecond},
		{95, 95 * time.Millisecond},
		{99, 99 * time.Millisecond},
		{100, 100 * time.Millisecond},
		{0, 1 * time.Millisecond},
	} {
		if got := stats.Percentile(s, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	// Few samples: p99 of three is the largest, p50 the middle one.
	three := []time.Duration{1, 2, 3}
	if stats.Percentile(three, 99) != 3 || stats.Percentile(three, 50) != 2 {
		t.Errorf("p99, p50 of %v = %v, %v", three, stats.Percentile(three, 99), stats.Percentile(three, 50))
	}
}

func TestSummarize(t *testing.T) {
	got := summarize([]time.Duration{4 * time.Millisecond, 1 * time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond})
	want := Latency{Count: 4, P50Ms: 2, P95Ms: 4, P99Ms: 4, MeanMs: 2.5, MinMs: 1, MaxMs: 4}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if (summarize(nil) != Latency{}) {
		t.Error("an empty series summarizes to something")
	}
}

func TestThroughput(t *testing.T) {
	got := throughput(100e6, []time.Duration{time.Second, 2 * time.Second, 500 * time.Millisecond})
	if got.MedianMBps != 100 || len(got.RunsMBps) != 3 || got.RunsMBps[1] != 50 || got.RunsMBps[2] != 200 {
		t.Errorf("got %+v", got)
	}
	if stats.Median([]float64{1, 2, 3, 4}) != 2.5 || stats.Median(nil) != 0 {
		t.Error("median of an even or empty series")
	}
	if ratio(1, 0) != 0 || ratio(1, 4) != 0.25 {
		t.Error("ratio")
	}
}

func TestGuestHandler(t *testing.T) {
	srv := httptest.NewServer(guestHandler())
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/bytes?n=200000")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(b) != 200000 || resp.ContentLength != 200000 {
		t.Errorf("GET: %s, %d bytes, Content-Length %d", resp.Status, len(b), resp.ContentLength)
	}

	resp, err = http.Post(srv.URL+"/upload", "application/octet-stream", io.LimitReader(zeros{}, 300000))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "300000" {
		t.Errorf("POST answered %q", b)
	}

	for _, q := range []string{"", "n=-1", "n=x"} {
		resp, err := http.Get(srv.URL + "/bytes?" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET ?%s: %s", q, resp.Status)
		}
	}
}

func TestProxyFlags(t *testing.T) {
	got := strings.Join(proxyArgs{kubeconfig: "k", domain: "d", namespace: "n", secretFile: "s", tokenFile: "t"}.flags("127.0.0.1:1"), " ")
	want := "--bind-address=127.0.0.1:1 --domain=d --namespace=n --kubeconfig=k --e2b-envd-secret-file=s --sandboxd-token-file=t"
	if got != want {
		t.Errorf("flags %q, want %q", got, want)
	}
}
