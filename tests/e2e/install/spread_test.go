package install_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tests/install"
)

// spread is an HTTP front that sends each request to the next replica in
// turn, on a connection of its own: a client behind it has every call
// answered by another replica than the one before, as clients spread over
// a Service's replicas are, but without a kept-alive connection pinning it
// to one.
type spread struct {
	URL string

	mu     sync.Mutex
	next   int
	served map[string]int
}

func startSpread(t *testing.T, replicas []string) *spread {
	t.Helper()
	s := &spread{served: map[string]int{}}
	proxy := &httputil.ReverseProxy{
		Transport: &http.Transport{DisableKeepAlives: true},
		Rewrite: func(r *httputil.ProxyRequest) {
			s.mu.Lock()
			target := replicas[s.next%len(replicas)]
			s.next++
			s.served[target]++
			s.mu.Unlock()
			r.SetURL(&url.URL{Scheme: "http", Host: target})
		},
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// counts is how many requests each replica served.
func (s *spread) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.served))
	for k, v := range s.served {
		out[k] = v
	}
	return out
}

// e2bReplicas are the e2b surface's address on every running
// sandbox-apiserver pod.
func e2bReplicas(ctx context.Context, t *testing.T, n *cluster.NodeCluster) []string {
	t.Helper()
	pods, err := n.Clientset().CoreV1().Pods(install.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=sandbox-apiserver"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Spec.Containers {
			for _, port := range c.Ports {
				if port.Name == "e2b" {
					out = append(out, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port.ContainerPort))))
				}
			}
		}
	}
	slices.Sort(out)
	if len(out) < 2 {
		t.Fatalf("want the e2b surface on at least two sandbox-apiserver pods, found %v", out)
	}
	return out
}

func describeCounts(c map[string]int) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := ""
	for _, k := range keys {
		out += fmt.Sprintf(" %s:%d", k, c[k])
	}
	return out
}
