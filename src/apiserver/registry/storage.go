package registry

import (
	"context"
	"fmt"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
)

// Resource is the plural name Sandbox is served under.
const Resource = "sandboxes"

var groupResource = agentsv1beta1.Resource(Resource)

// REST serves sandboxes from a Backend.
type REST struct {
	backend Backend
	table   tableConvertor
}

var (
	_ rest.Storage              = &REST{}
	_ rest.Scoper               = &REST{}
	_ rest.KindProvider         = &REST{}
	_ rest.SingularNameProvider = &REST{}
	_ rest.Getter               = &REST{}
	_ rest.Lister               = &REST{}
	_ rest.Watcher              = &REST{}
	_ rest.Creater              = &REST{}
	_ rest.GracefulDeleter      = &REST{}
	_ rest.TableConvertor       = &REST{}
)

// NewREST returns the sandboxes storage over backend.
func NewREST(backend Backend) *REST {
	return &REST{backend: backend}
}

// New returns an empty Sandbox, the shape of a create body.
func (r *REST) New() runtime.Object { return &agentsv1beta1.Sandbox{} }

// NewList returns an empty SandboxList.
func (r *REST) NewList() runtime.Object { return &agentsv1beta1.SandboxList{} }

// Destroy has nothing to release: the backend's lifetime is the caller's.
func (r *REST) Destroy() {}

// NamespaceScoped is true: a sandbox lives in the namespace of its claim.
func (r *REST) NamespaceScoped() bool { return true }

// Kind is the served kind.
func (r *REST) Kind() string { return agentsv1beta1.SandboxKind }

// GetSingularName names the resource in discovery and kubectl.
func (r *REST) GetSingularName() string { return "sandbox" }

// Get answers one sandbox from the backend. resourceVersion in the options is
// not honoured: the backend always reads its freshest view.
func (r *REST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns, err := requestNamespace(ctx)
	if err != nil {
		return nil, err
	}
	return r.backend.Get(ctx, ns, name)
}

// List answers the sandboxes of the request namespace (all namespaces for a
// cluster-wide request) that match the options' selectors, ordered by
// namespace and name.
//
// limit pages the list: a page holds at most limit matching sandboxes and,
// when more may follow, a continue token and an estimate of how many
// (remainingItemCount, only without selectors). A page read with a
// continue token resumes after the previous page's last sandbox, in the
// view as it is now; see ListOptions for what that guarantees
// across a changing fleet. Every page of one list reports the first page's
// resourceVersion, the backend revision it was read at, so a watch from it
// continues without a gap.
//
// resourceVersion and resourceVersionMatch are not honoured beyond that:
// the backend has no history of lists, so every list reads its freshest
// view, which is what "" (most recent) asks for and at least as new as
// any other value asks for.
func (r *REST) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	ns := namespaceOf(ctx)
	match, err := newMatcher(options)
	if err != nil {
		return nil, err
	}
	opts := ListOptions{Match: match}
	var first *continueToken
	if options != nil {
		if options.Limit < 0 {
			return nil, errors.NewBadRequest(fmt.Sprintf("limit %d is negative", options.Limit))
		}
		opts.Limit = int(options.Limit)
		if options.Continue != "" {
			if options.ResourceVersion != "" && options.ResourceVersion != "0" {
				return nil, errors.NewBadRequest("specifying resourceVersion is not allowed when using continue")
			}
			t, err := decodeContinue(options.Continue)
			if err != nil {
				return nil, err
			}
			first = &t
			opts.After = sandbox.ClaimRef{Namespace: t.Namespace, Name: t.Name}
		}
	}
	if selectsAll(options) {
		opts.Match = nil // and the backend can estimate what is left
	}
	page, err := r.backend.ListPage(ctx, ns, opts)
	if err != nil {
		return nil, err
	}
	list := &agentsv1beta1.SandboxList{Items: page.Items}
	rev := page.Revision
	if first != nil {
		rev = first.Revision
	}
	list.ResourceVersion = revisionString(rev)
	if page.Next != (sandbox.ClaimRef{}) {
		list.Continue = encodeContinue(rev, page.Next)
		if page.Remaining >= 0 {
			list.RemainingItemCount = &page.Remaining
		}
	}
	return list, nil
}

// Create claims a sandbox. The body is validated here (kind is enforced by
// the decoder, namespace by the handler); the claim itself is the backend's.
//
// A dry run validates and answers the object as it would be sent to the
// backend, without claiming: it cannot tell whether the fleet has capacity.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	sb, ok := obj.(*agentsv1beta1.Sandbox)
	if !ok {
		return nil, errors.NewBadRequest(fmt.Sprintf("expected a Sandbox, got %T", obj))
	}
	ns, err := requestNamespace(ctx)
	if err != nil {
		return nil, err
	}
	sb = sb.DeepCopy()
	if sb.Namespace == "" {
		sb.Namespace = ns
	}
	if sb.Name == "" && sb.GenerateName != "" {
		sb.Name = names.SimpleNameGenerator.GenerateName(sb.GenerateName)
	}
	// Status is the backend's to report; a client cannot seed it.
	sb.Status = agentsv1beta1.SandboxStatus{}
	if errs := validateCreate(sb, ns); len(errs) > 0 {
		return nil, errors.NewInvalid(agentsv1beta1.GroupVersion.WithKind(agentsv1beta1.SandboxKind).GroupKind(), sb.Name, errs)
	}
	if createValidation != nil {
		if err := createValidation(ctx, sb); err != nil {
			return nil, err
		}
	}
	if isDryRun(options.DryRun) {
		return sb, nil
	}
	return r.backend.Create(ctx, sb)
}

func validateCreate(sb *agentsv1beta1.Sandbox, requestNS string) field.ErrorList {
	meta := field.NewPath("metadata")
	errs := apimachineryvalidation.ValidateObjectMetaAccessor(&sb.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, meta)
	if sb.Namespace != requestNS {
		errs = append(errs, field.Invalid(meta.Child("namespace"), sb.Namespace, "does not match the namespace of the request"))
	}
	// Nothing is stored, so nothing could ever hold the object back for a
	// finalizer; accepting one would promise what the server cannot do.
	if len(sb.Finalizers) > 0 {
		errs = append(errs, field.Forbidden(meta.Child("finalizers"), "sandboxes are not stored objects and cannot carry finalizers"))
	}
	return errs
}

// Delete releases a sandbox on its node. Preconditions (uid,
// resourceVersion) are checked against the backend's current view; a dry
// run checks them and answers that view without releasing anything.
func (r *REST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	ns, err := requestNamespace(ctx)
	if err != nil {
		return nil, false, err
	}
	if options == nil {
		options = &metav1.DeleteOptions{}
	}
	needCurrent := options.Preconditions != nil || deleteValidation != nil || isDryRun(options.DryRun)
	if needCurrent {
		current, err := r.backend.Get(ctx, ns, name)
		if err != nil {
			return nil, false, err
		}
		if err := checkPreconditions(current, options.Preconditions); err != nil {
			return nil, false, err
		}
		if deleteValidation != nil {
			if err := deleteValidation(ctx, current); err != nil {
				return nil, false, err
			}
		}
		if isDryRun(options.DryRun) {
			return current, true, nil
		}
	}
	last, err := r.backend.Delete(ctx, ns, name)
	if err != nil {
		return nil, false, err
	}
	return last, true, nil
}

func checkPreconditions(sb *agentsv1beta1.Sandbox, pre *metav1.Preconditions) error {
	if pre == nil {
		return nil
	}
	if pre.UID != nil && *pre.UID != sb.UID {
		return errors.NewConflict(groupResource, sb.Name, fmt.Errorf("precondition failed: uid is %q, not %q", sb.UID, *pre.UID))
	}
	if pre.ResourceVersion != nil && *pre.ResourceVersion != sb.ResourceVersion {
		return errors.NewConflict(groupResource, sb.Name, fmt.Errorf("precondition failed: resourceVersion is %q, not %q", sb.ResourceVersion, *pre.ResourceVersion))
	}
	return nil
}

// ConvertToTable renders sandboxes with the columns kubectl get shows.
func (r *REST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.table.ConvertToTable(ctx, object, tableOptions)
}

func isDryRun(dryRun []string) bool {
	return len(dryRun) > 0 && dryRun[0] == metav1.DryRunAll
}
