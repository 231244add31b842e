package serve

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

func TestMetricsListenerCountsGoroutines(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	srv, err := ListenMetrics("127.0.0.1:0", reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	url := "http://" + srv.Addr().String() + MetricsPath

	goroutines := func() int {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`(?m)^go_goroutines (\d+)$`).FindSubmatch(body)
		if resp.StatusCode != http.StatusOK || m == nil {
			t.Fatalf("GET %s: %s, no go_goroutines in:\n%.400s", MetricsPath, resp.Status, body)
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	before := goroutines()
	stop := make(chan struct{})
	var parked sync.WaitGroup
	for range 50 {
		parked.Go(func() { <-stop })
	}
	if got := goroutines(); got < before+50 {
		t.Errorf("go_goroutines %d with 50 more parked, was %d", got, before)
	}
	close(stop)
	parked.Wait()

	resp, err := http.Post(url, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %s, want 405", MetricsPath, resp.Status)
	}
}
