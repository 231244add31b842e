package backend

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/apiserver/registry"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// Condition reasons this server sets beside upstream's.
const (
	// ReasonHibernated: Suspended=True because sandboxd hibernated the VM.
	ReasonHibernated = "Hibernated"
	// ReasonUnknownPhase: Ready=False because the node reported a phase
	// this server does not know (it is treated as not running).
	ReasonUnknownPhase = "UnknownPhase"
	// ReasonMachineFailed: Ready=False because the sandbox's VMM died and
	// the node did not restart it (sandboxd's failed state).
	ReasonMachineFailed = "MachineFailed"
)

// containerName names the single container a served Sandbox's pod template
// carries when the server synthesizes one from inventory.
const containerName = "sandbox"

// view is one sandbox as this replica shows it: the inventory entry (or the
// entry a recent write expects), and for a sandbox this replica created,
// the object as the client sent it.
type view struct {
	entry inventory.Entry
	obj   *agentsv1beta1.Sandbox
}

func (v *view) same(o *view) bool { return v.obj == o.obj && v.entry.Same(&o.entry) }

// uidFor derives a stable UID from where the sandbox lives, so every replica
// serves the same UID for it and a new claim under an old name gets a new
// one.
func uidFor(node, id string) types.UID {
	sum := sha256.Sum256([]byte("sandbox.cocoonstack.io/" + node + "/" + id))
	sum[6] = sum[6]&0x0f | 0x80 // RFC 9562 version 8: custom
	sum[8] = sum[8]&0x3f | 0x80 // RFC 9562 variant
	var buf [36]byte
	hex.Encode(buf[0:8], sum[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], sum[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], sum[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], sum[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:36], sum[10:16])
	return types.UID(buf[:])
}

// toSandbox renders a view as the Sandbox the API serves at revision rev.
func toSandbox(v *view, rev registry.Revision) *agentsv1beta1.Sandbox {
	out := &agentsv1beta1.Sandbox{}
	fillSandbox(out, v, rev)
	return out
}

// fillSandbox renders a view into out, which must be zero; a list renders
// straight into its items this way instead of copying each object.
func fillSandbox(out *agentsv1beta1.Sandbox, v *view, rev registry.Revision) {
	e := &v.entry
	if v.obj != nil {
		v.obj.DeepCopyInto(out)
	} else {
		if e.Template != "" {
			out.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: containerName, Image: e.Template}}
		}
	}
	out.APIVersion = agentsv1beta1.GroupVersion.String()
	out.Kind = "Sandbox"
	out.Namespace, out.Name = e.Namespace, e.ObjectName
	out.UID = uidFor(e.Node, e.ID)
	out.ResourceVersion = strconv.FormatUint(uint64(rev), 10)
	out.Generation = 1
	out.DeletionTimestamp, out.DeletionGracePeriodSeconds, out.ManagedFields = nil, nil, nil
	if !e.ClaimedAt.IsZero() {
		out.CreationTimestamp = metav1.NewTime(e.ClaimedAt)
	}

	if out.Annotations == nil {
		out.Annotations = make(map[string]string, 4)
	}
	out.Annotations[sandbox.AnnotationNode] = e.Node
	out.Annotations[sandbox.AnnotationID] = e.ID
	if e.Template != "" {
		out.Annotations[sandbox.AnnotationTemplate] = e.Template
	}
	delete(out.Annotations, sandbox.AnnotationDeadline)
	if !e.Deadline.IsZero() {
		out.Annotations[sandbox.AnnotationDeadline] = e.Deadline.UTC().Format(time.RFC3339)
	}
	if len(validation.IsValidLabelValue(e.Node)) == 0 {
		if out.Labels == nil {
			out.Labels = make(map[string]string, 1)
		}
		out.Labels[sandbox.LabelNode] = e.Node
	}

	out.Spec.ShutdownTime = nil
	if !e.Deadline.IsZero() {
		t := metav1.NewTime(e.Deadline)
		out.Spec.ShutdownTime = &t
	}
	// The node reaps the sandbox at its deadline and nothing is retained,
	// whatever the client asked for.
	del := agentsv1beta1.ShutdownPolicyDelete
	out.Spec.ShutdownPolicy = &del
	out.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeRunning
	if e.Phase == v1beta1.SandboxPhaseHibernated {
		out.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended
	}
	out.Status = statusFor(e)
}

// statusFor maps the node's phase onto upstream's conditions: Running is
// Ready, Hibernated is Suspended and not Ready, anything else not Ready.
func statusFor(e *inventory.Entry) agentsv1beta1.SandboxStatus {
	since := metav1.NewTime(e.ClaimedAt)
	cond := func(t agentsv1beta1.ConditionType, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: string(t), Status: s, Reason: reason, Message: msg, ObservedGeneration: 1, LastTransitionTime: since}
	}
	st := agentsv1beta1.SandboxStatus{NodeName: e.Node}
	switch e.Phase {
	case v1beta1.SandboxPhaseRunning:
		st.Conditions = []metav1.Condition{
			cond(agentsv1beta1.SandboxConditionReady, metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady, "The microVM is running."),
			cond(agentsv1beta1.SandboxConditionSuspended, metav1.ConditionFalse, agentsv1beta1.SandboxReasonNotSuspended, ""),
		}
	case v1beta1.SandboxPhaseHibernated:
		st.Conditions = []metav1.Condition{
			cond(agentsv1beta1.SandboxConditionReady, metav1.ConditionFalse, agentsv1beta1.SandboxReasonSuspended, "The microVM is hibernated; the next access or a resume wakes it."),
			cond(agentsv1beta1.SandboxConditionSuspended, metav1.ConditionTrue, ReasonHibernated, ""),
		}
	case v1beta1.SandboxPhaseFailed:
		st.Conditions = []metav1.Condition{
			cond(agentsv1beta1.SandboxConditionReady, metav1.ConditionFalse, ReasonMachineFailed, "The microVM's VMM died and was not restarted; resume boots it again from its disk (its memory is lost), or delete the sandbox."),
			cond(agentsv1beta1.SandboxConditionSuspended, metav1.ConditionFalse, agentsv1beta1.SandboxReasonNotSuspended, ""),
		}
	default:
		st.Conditions = []metav1.Condition{
			cond(agentsv1beta1.SandboxConditionReady, metav1.ConditionFalse, ReasonUnknownPhase, fmt.Sprintf("The node reports phase %q.", e.Phase)),
		}
	}
	return st
}
