package registry

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
)

const (
	// none is what kubectl prints for an absent value.
	none = "<none>"
	// The node phases a sandbox shows, as NodeInventory names them.
	phaseRunning    = "Running"
	phaseHibernated = "Hibernated"
)

var tableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name of the sandbox."},
	{Name: "Node", Type: "string", Description: "Node that holds the sandbox's microVM."},
	{Name: "Phase", Type: "string", Description: "Phase the owning node last published for the sandbox."},
	{Name: "Template", Type: "string", Description: "Warm-pool template the sandbox was claimed from."},
	{Name: "Age", Type: "string", Description: "Time since the sandbox was claimed."},
	{Name: "Deadline", Type: "string", Format: "date-time", Description: "When the node ends the sandbox's lease, in RFC 3339."},
}

// tableConvertor renders sandboxes for kubectl get. The values come from
// what the backend reports: node, phase, template and deadline are read from
// the sandbox's annotations or labels under any domain (so the backend's
// key prefix is not baked in here), falling back to the upstream fields that
// mean the same (status.nodeName, the Ready condition, spec.shutdownTime).
type tableConvertor struct{}

func (tableConvertor) ConvertToTable(_ context.Context, object runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{ColumnDefinitions: tableColumns}
	now := time.Now()
	switch obj := object.(type) {
	case *agentsv1beta1.Sandbox:
		table.ResourceVersion = obj.ResourceVersion
		table.Rows = []metav1.TableRow{row(obj, now)}
	case *agentsv1beta1.SandboxList:
		table.ResourceVersion = obj.ResourceVersion
		table.Continue = obj.Continue
		table.RemainingItemCount = obj.RemainingItemCount
		table.Rows = make([]metav1.TableRow, 0, len(obj.Items))
		for i := range obj.Items {
			table.Rows = append(table.Rows, row(&obj.Items[i], now))
		}
	default:
		return nil, fmt.Errorf("cannot render %T as a sandbox table", object)
	}
	return table, nil
}

func row(sb *agentsv1beta1.Sandbox, now time.Time) metav1.TableRow {
	return metav1.TableRow{
		Cells: []interface{}{
			sb.Name,
			orNone(nodeOf(sb)),
			orNone(phaseOf(sb)),
			orNone(metaValue(sb, "template")),
			age(sb.CreationTimestamp, now),
			orNone(deadlineOf(sb)),
		},
		Object: runtime.RawExtension{Object: sb},
	}
}

func nodeOf(sb *agentsv1beta1.Sandbox) string {
	if sb.Status.NodeName != "" {
		return sb.Status.NodeName
	}
	return metaValue(sb, "node")
}

// phaseOf prefers a published phase annotation; otherwise it reads the
// phase back from upstream's conditions, as the backend maps node phases
// onto them: Ready=True is Running, Suspended=True is Hibernated, and any
// other Ready=False shows its reason.
func phaseOf(sb *agentsv1beta1.Sandbox) string {
	if v := metaValue(sb, "phase"); v != "" {
		return v
	}
	var ready *metav1.Condition
	for i := range sb.Status.Conditions {
		c := &sb.Status.Conditions[i]
		switch {
		case c.Type == string(agentsv1beta1.SandboxConditionSuspended) && c.Status == metav1.ConditionTrue:
			return phaseHibernated
		case c.Type == string(agentsv1beta1.SandboxConditionReady):
			ready = c
		}
	}
	switch {
	case ready == nil:
		return ""
	case ready.Status == metav1.ConditionTrue:
		return phaseRunning
	default:
		return ready.Reason
	}
}

func deadlineOf(sb *agentsv1beta1.Sandbox) string {
	if v := metaValue(sb, "deadline"); v != "" {
		return v
	}
	if sb.Spec.ShutdownTime != nil {
		return sb.Spec.ShutdownTime.UTC().Format(time.RFC3339)
	}
	return ""
}

// metaValue finds the value of key in the sandbox's annotations, then its
// labels, as either a bare key or the name part of a prefixed key
// ("example.com/phase"). When several prefixed keys share the name, the
// lexically first key wins so the output is stable.
func metaValue(sb *agentsv1beta1.Sandbox, key string) string {
	for _, m := range []map[string]string{sb.Annotations, sb.Labels} {
		if v, ok := m[key]; ok && v != "" {
			return v
		}
		best, value := "", ""
		for k, v := range m {
			if v == "" {
				continue
			}
			if _, name, found := strings.Cut(k, "/"); found && name == key && (best == "" || k < best) {
				best, value = k, v
			}
		}
		if value != "" {
			return value
		}
	}
	return ""
}

func age(created metav1.Time, now time.Time) string {
	if created.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(created.Time))
}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}
