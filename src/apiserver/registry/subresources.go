package registry

import (
	"github.com/cocoonstack/sandbox-operator/src/sandbox"

	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/apiserver/api/subresources"
)

// action is the shared shape of the POST-only subresources: the body is an
// options kind, the response a result kind, and the work one backend call.
type action struct {
	name    string
	newBody func() runtime.Object
	result  runtime.Object
	do      func(ctx context.Context, ns, name string, body runtime.Object) (runtime.Object, error)
}

var (
	_ rest.Storage         = &action{}
	_ rest.NamedCreater    = &action{}
	_ rest.StorageMetadata = &action{}
)

func (a *action) New() runtime.Object { return a.newBody() }
func (a *action) Destroy()            {}

// ProducesMIMETypes adds nothing to the server's defaults.
func (a *action) ProducesMIMETypes(string) []string { return nil }

// ProducesObject is the response kind, for discovery and OpenAPI: the body
// kind (New) differs from what a POST answers.
func (a *action) ProducesObject(string) interface{} { return a.result }

// Create runs the action on the named sandbox. These verbs change a running
// microVM and have nothing to rehearse, so a dry run is refused.
func (a *action) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	ns, err := requestNamespace(ctx)
	if err != nil {
		return nil, err
	}
	if options != nil && isDryRun(options.DryRun) {
		return nil, errors.NewBadRequest(fmt.Sprintf("dryRun is not supported for sandboxes/%s", a.name))
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj); err != nil {
			return nil, err
		}
	}
	return a.do(ctx, ns, name, obj)
}

// NewSubresources returns the storages of sandboxes/pause, /resume, /fork and
// /snapshot, keyed by their path under the resource.
func NewSubresources(backend Backend) map[string]rest.Storage {
	return map[string]rest.Storage{
		Resource + "/pause": &action{
			name:    "pause",
			newBody: func() runtime.Object { return &subresources.SandboxPauseOptions{} },
			result:  &agentsv1beta1.Sandbox{},
			do: func(ctx context.Context, ns, name string, body runtime.Object) (runtime.Object, error) {
				if _, ok := body.(*subresources.SandboxPauseOptions); !ok {
					return nil, unexpectedBody(body, subresources.PauseOptionsKind)
				}
				return backend.Pause(ctx, ns, name)
			},
		},
		Resource + "/resume": &action{
			name:    "resume",
			newBody: func() runtime.Object { return &subresources.SandboxResumeOptions{} },
			result:  &agentsv1beta1.Sandbox{},
			do: func(ctx context.Context, ns, name string, body runtime.Object) (runtime.Object, error) {
				if _, ok := body.(*subresources.SandboxResumeOptions); !ok {
					return nil, unexpectedBody(body, subresources.ResumeOptionsKind)
				}
				return backend.Resume(ctx, ns, name)
			},
		},
		Resource + "/fork": &action{
			name:    "fork",
			newBody: func() runtime.Object { return &subresources.SandboxForkOptions{} },
			result:  &subresources.SandboxForkResult{},
			do: func(ctx context.Context, ns, name string, body runtime.Object) (runtime.Object, error) {
				opts, ok := body.(*subresources.SandboxForkOptions)
				if !ok {
					return nil, unexpectedBody(body, subresources.ForkOptionsKind)
				}
				count := opts.Count
				if count == 0 {
					count = 1
				}
				if errs := validateFork(count, opts.TTLSeconds); len(errs) > 0 {
					return nil, errors.NewInvalid(subresources.Kind(subresources.ForkOptionsKind).GroupKind(), name, errs)
				}
				children, err := backend.Fork(ctx, ns, name, int(count), opts.TTLSeconds)
				if err != nil {
					return nil, err
				}
				if children == nil {
					children = []agentsv1beta1.Sandbox{}
				}
				return &subresources.SandboxForkResult{Parent: name, Children: children}, nil
			},
		},
		Resource + "/snapshot": &action{
			name:    "snapshot",
			newBody: func() runtime.Object { return &subresources.SandboxSnapshotOptions{} },
			result:  &subresources.SandboxSnapshot{},
			do: func(ctx context.Context, ns, name string, body runtime.Object) (runtime.Object, error) {
				opts, ok := body.(*subresources.SandboxSnapshotOptions)
				if !ok {
					return nil, unexpectedBody(body, subresources.SnapshotOptionsKind)
				}
				if errs := validateSnapshotName(opts.Name); len(errs) > 0 {
					return nil, errors.NewInvalid(subresources.Kind(subresources.SnapshotOptionsKind).GroupKind(), name, errs)
				}
				res, err := backend.Snapshot(ctx, ns, name, opts.Name)
				if err != nil {
					return nil, err
				}
				return &subresources.SandboxSnapshot{
					Sandbox:   name,
					ID:        res.ID,
					Name:      res.Name,
					Node:      res.Node,
					CreatedAt: res.CreatedAt,
				}, nil
			},
		},
	}
}

func validateFork(count int32, ttlSeconds int64) field.ErrorList {
	var errs field.ErrorList
	if count < 1 || count > sandbox.MaxForkCount {
		errs = append(errs, field.Invalid(field.NewPath("count"), count, fmt.Sprintf("must be between 1 and %d", sandbox.MaxForkCount)))
	}
	if ttlSeconds < 0 {
		errs = append(errs, field.Invalid(field.NewPath("ttlSeconds"), ttlSeconds, "must not be negative"))
	}
	return errs
}

// validateSnapshotName keeps checkpoint names to DNS-1123 subdomains: they
// travel to the node in a JSON body and come back in listings, and a tame
// alphabet keeps them safe to show and to use as file names on the node.
func validateSnapshotName(name string) field.ErrorList {
	if name == "" {
		return nil
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(field.NewPath("name"), name, strings.Join(msgs, "; "))}
	}
	return nil
}

func unexpectedBody(obj runtime.Object, kind string) error {
	return errors.NewBadRequest(fmt.Sprintf("expected a %s body, got %T", kind, obj))
}
