package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// WarmPoolGVR is upstream's SandboxWarmPool resource.
var WarmPoolGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}

// warmPoolTimeout bounds filling the example pool: the driver's first
// pass, the simulated nodes' clones and the next NodeInventory publish.
const warmPoolTimeout = 3 * time.Minute

// ApplyWarmPools applies the examples' warm pools (the L3 one and the one
// behind the e2b SDK's default template) and waits until each reports
// readyReplicas at its target.
func ApplyWarmPools(ctx context.Context, s *Stack, a Artifacts, logf func(string, ...any)) error {
	for _, f := range []string{a.TemplateWarmPool, a.E2BWarmPool, a.CodeInterpreterWarmPool} {
		if err := applyWarmPool(ctx, s, f, logf); err != nil {
			return err
		}
	}
	return nil
}

func applyWarmPool(ctx context.Context, s *Stack, file string, logf func(string, ...any)) error {
	logf("kubectl apply -f %s", filepath.Join(filepath.Base(filepath.Dir(file)), filepath.Base(file)))
	if _, err := s.Kubectl(ctx, "apply", "-f", file); err != nil {
		return err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	objs, err := DecodeAll(string(data))
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	ctx, cancel := context.WithTimeout(ctx, warmPoolTimeout)
	defer cancel()
	pools := 0
	for _, o := range objs {
		if o.GetKind() != "SandboxWarmPool" {
			continue
		}
		pools++
		if err := waitWarmPool(ctx, s, o, logf); err != nil {
			return err
		}
	}
	if pools == 0 {
		return fmt.Errorf("%s holds no SandboxWarmPool", file)
	}
	return nil
}

// waitWarmPool waits until pool reports every replica ready.
func waitWarmPool(ctx context.Context, s *Stack, pool *unstructured.Unstructured, logf func(string, ...any)) error {
	last := ""
	for {
		wp, err := s.Node.Dynamic().Resource(WarmPoolGVR).Namespace(NamespaceOf(pool)).Get(ctx, pool.GetName(), metav1.GetOptions{})
		if err == nil {
			want, _, _ := unstructured.NestedInt64(wp.Object, "spec", "replicas")
			ready, _, _ := unstructured.NestedInt64(wp.Object, "status", "readyReplicas")
			if want > 0 && ready >= want {
				logf("SandboxWarmPool %s: %d of %d ready", pool.GetName(), ready, want)
				return nil
			}
			last = fmt.Sprintf("readyReplicas %d of %d", ready, want)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("SandboxWarmPool %s not ready: %w (last: %s)", pool.GetName(), context.Cause(ctx), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// DecodeAll splits a multi-document YAML stream into objects.
func DecodeAll(data string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if err.Error() == "EOF" {
				return objs, nil
			}
			return nil, fmt.Errorf("decode YAML: %w", err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// FirstObject returns the first object of kind in the YAML file at path.
func FirstObject(path, kind string) (*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := DecodeAll(string(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, o := range objs {
		if o.GetKind() == kind {
			return o, nil
		}
	}
	return nil, fmt.Errorf("%s holds no %s", path, kind)
}

// NamespaceOf is the object's namespace, "default" when it names none
// (as kubectl apply places it).
func NamespaceOf(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return "default"
	}
	return o.GetNamespace()
}
