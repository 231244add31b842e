package install_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tests/install"
)

// steadyLoad is a user's traffic through the install's Services while its
// pods are replaced: each worker, once a second, creates a sandbox on the
// isolated lane, reads it, lists, uploads a file through the data plane
// and reads it back, and kills the sandbox. Each worker keeps its
// connections alive, as the SDK does, so a pod that stops without
// draining shows up as failed calls.
type steadyLoad struct {
	api, proxy, key, domain string
	upload                  []byte

	calls, failed atomic.Int64
	streamed      streamTally
	mu            sync.Mutex
	failures      []string
	stop          chan struct{}
	wg            sync.WaitGroup
}

func startLoad(apiAddr, proxyAddr, key, domain string, workers int) *steadyLoad {
	l := &steadyLoad{api: "http://" + apiAddr, proxy: "http://" + proxyAddr, key: key, domain: domain,
		upload: make([]byte, 2<<20), stop: make(chan struct{})}
	_, _ = rand.Read(l.upload)
	// One more worker streams long commands through the proxy the whole
	// time (see streams).
	streamClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	l.wg.Go(func() { l.streams(streamClient) })
	for range workers {
		client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				// One round a second per worker keeps the creates under
				// the surface's per-key rate (5 a second by default).
				began := time.Now()
				l.round(client)
				select {
				case <-l.stop:
					return
				case <-time.After(time.Second - time.Since(began)):
				}
			}
		})
	}
	return l
}

// stopLoad ends the load once every worker's round is complete.
func (l *steadyLoad) stopLoad() (calls, failed int64, failures []string) {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls.Load(), l.failed.Load(), l.failures
}

// call counts one call, and fails it unless it answered want.
func (l *steadyLoad) call(c *http.Client, req *http.Request, want int) ([]byte, bool) {
	l.calls.Add(1)
	resp, err := c.Do(req)
	if err != nil {
		l.fail(fmt.Sprintf("%s %s: %v", req.Method, req.URL.Path, err))
		return nil, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != want {
		l.fail(fmt.Sprintf("%s %s: %d (want %d) %.200s %v", req.Method, req.URL.Path, resp.StatusCode, want, body, err))
		return nil, false
	}
	return body, true
}

func (l *steadyLoad) fail(what string) {
	l.failed.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failures) < 20 {
		l.failures = append(l.failures, time.Now().Format("15:04:05.000")+" "+what)
	}
}

func (l *steadyLoad) apiRequest(method, path string, body any) *http.Request {
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequestWithContext(context.Background(), method, l.api+path, rd)
	req.Header.Set("X-API-Key", l.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// envdRequest reaches the sandbox's envd through the proxy by host name,
// with the sandbox's access token.
func (l *steadyLoad) envdRequest(method, id, token, query string, body []byte) *http.Request {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(context.Background(), method, l.proxy+"/files?"+query, rd)
	req.Host = "49983-" + id + "." + l.domain
	req.Header.Set("X-Access-Token", token)
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	return req
}

// loadSandbox is what a create of the load answers that it uses.
type loadSandbox struct {
	SandboxID       string `json:"sandboxID"`
	EnvdAccessToken string `json:"envdAccessToken"`
}

// create makes a sandbox on the isolated lane with the lease timeout
// (seconds), labelled load=label, counting the call; ok is false when it
// failed (and was counted as failed).
func (l *steadyLoad) create(c *http.Client, timeout int, label string) (created loadSandbox, ok bool) {
	body, ok := l.call(c, l.apiRequest(http.MethodPost, "/sandboxes",
		map[string]any{"templateID": "base", "timeout": timeout, "allow_internet_access": false, "metadata": map[string]string{"load": label}}), http.StatusCreated)
	if !ok {
		return created, false
	}
	if err := json.Unmarshal(body, &created); err != nil || created.SandboxID == "" {
		l.fail(fmt.Sprintf("create answered %.200s", body))
		return created, false
	}
	return created, true
}

func (l *steadyLoad) round(c *http.Client) {
	created, ok := l.create(c, 120, "upgrade")
	if !ok {
		return
	}
	id := created.SandboxID
	defer l.call(c, l.apiRequest(http.MethodDelete, "/sandboxes/"+id, nil), http.StatusNoContent)
	l.call(c, l.apiRequest(http.MethodGet, "/sandboxes/"+id, nil), http.StatusOK)
	l.call(c, l.apiRequest(http.MethodGet, "/v2/sandboxes?metadata="+url.QueryEscape("load=upgrade"), nil), http.StatusOK)
	q := url.Values{"path": {"/home/user/upload.bin"}, "username": {"user"}}.Encode()
	if _, ok := l.call(c, l.envdRequest(http.MethodPost, id, created.EnvdAccessToken, q, l.upload), http.StatusOK); !ok {
		return
	}
	got, ok := l.call(c, l.envdRequest(http.MethodGet, id, created.EnvdAccessToken, q, nil), http.StatusOK)
	if ok && !bytes.Equal(got, l.upload) {
		l.fail(fmt.Sprintf("the file read back through the data plane is %d bytes, not the %d uploaded", len(got), len(l.upload)))
	}
}

// availability samples the Deployments' available replicas while pods
// are replaced, keeping the fewest seen for each.
type availability struct {
	stopCh chan struct{}
	done   chan map[string]int32
}

func watchAvailability(ctx context.Context, n *cluster.NodeCluster) *availability {
	a := &availability{stopCh: make(chan struct{}), done: make(chan map[string]int32, 1)}
	go func() {
		fewest := map[string]int32{}
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			deps, err := n.Clientset().AppsV1().Deployments(install.Namespace).List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, d := range deps.Items {
					if v, ok := fewest[d.Name]; !ok || d.Status.AvailableReplicas < v {
						fewest[d.Name] = d.Status.AvailableReplicas
					}
				}
			}
			select {
			case <-a.stopCh:
				a.done <- fewest
				return
			case <-t.C:
			}
		}
	}()
	return a
}

func (a *availability) stop() map[string]int32 {
	close(a.stopCh)
	return <-a.done
}

// allAvailable reports whether every Deployment has all its replicas
// available and no extra pod left.
func allAvailable(ctx context.Context, n *cluster.NodeCluster) (bool, string) {
	deps, err := n.Clientset().AppsV1().Deployments(install.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	for _, d := range deps.Items {
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if d.Status.AvailableReplicas != want || d.Status.Replicas != want {
			return false, fmt.Sprintf("%s: %d of %d available, %d pods", d.Name, d.Status.AvailableReplicas, want, d.Status.Replicas)
		}
	}
	return true, ""
}
