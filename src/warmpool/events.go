package warmpool

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
)

// Reasons of the events the driver records on a SandboxWarmPool. The
// upstream status has no conditions, so events are the whole account.
const (
	// ReasonPlaced: the pool's replicas are spread over the nodes.
	ReasonPlaced = "Placed"
	// ReasonNoNodes: no fresh node advertises a sandboxd address.
	ReasonNoNodes = "NoNodes"
	// ReasonTemplateNotFound: spec.sandboxTemplateRef names no template.
	ReasonTemplateNotFound = "TemplateNotFound"
	// ReasonTemplateInvalid: the template names no pool template.
	ReasonTemplateInvalid = "TemplateInvalid"
	// ReasonNodeRefused: a node holding a share refused its pool set.
	ReasonNodeRefused = "NodeRefused"
)

// eventAction is the events.k8s.io action of every driver event.
const eventAction = "Reconcile"

// verdict is what one pass concluded about one pool.
type verdict struct {
	Type, Reason, Note string
}

// eventLog records an event only when a pool's verdict changes, so a
// steady pool costs no apiserver write per pass.
type eventLog struct {
	recorder events.EventRecorder

	mu   sync.Mutex
	last map[types.NamespacedName]verdict
}

func newEventLog(recorder events.EventRecorder) *eventLog {
	return &eventLog{recorder: recorder, last: map[types.NamespacedName]verdict{}}
}

func (l *eventLog) record(pool *extv1beta1.SandboxWarmPool, v verdict) {
	key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}
	l.mu.Lock()
	same := l.last[key] == v
	l.last[key] = v
	l.mu.Unlock()
	if same || l.recorder == nil {
		return
	}
	l.recorder.Eventf(pool, nil, v.Type, v.Reason, eventAction, "%s", v.Note)
}

// forgetExcept drops the verdicts of pools that no longer exist.
func (l *eventLog) forgetExcept(live map[types.NamespacedName]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.last {
		if !live[k] {
			delete(l.last, k)
		}
	}
}

func warning(reason, note string) verdict {
	return verdict{Type: corev1.EventTypeWarning, Reason: reason, Note: note}
}

func normal(reason, note string) verdict {
	return verdict{Type: corev1.EventTypeNormal, Reason: reason, Note: note}
}

// ReasonNoToken: the driver runs without a sandboxd token and sets nothing.
const ReasonNoToken = "NoToken"
