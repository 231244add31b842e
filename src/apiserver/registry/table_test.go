package registry

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
)

func TestTableCells(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	shutdown := metav1.NewTime(time.Date(2030, 1, 1, 13, 0, 0, 0, time.FixedZone("x", 3600)))
	cases := []struct {
		name string
		sb   agentsv1beta1.Sandbox
		want []interface{}
	}{
		{
			name: "annotations under any domain",
			sb: agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{
				Name:              "a",
				CreationTimestamp: metav1.NewTime(now.Add(-90 * time.Second)),
				Annotations: map[string]string{
					"sandbox.cocoonstack.io/node":     "n1",
					"sandbox.cocoonstack.io/phase":    "Running",
					"sandbox.cocoonstack.io/template": "py",
					"sandbox.cocoonstack.io/deadline": "2030-01-01T12:05:00Z",
				},
			}},
			want: []interface{}{"a", "n1", "Running", "py", "90s", "2030-01-01T12:05:00Z"},
		},
		{
			name: "upstream fields as fallback",
			sb: agentsv1beta1.Sandbox{
				ObjectMeta: metav1.ObjectMeta{Name: "b", CreationTimestamp: metav1.NewTime(now.Add(-3 * time.Hour)),
					Labels: map[string]string{"example.com/template": "from-label"}},
				Spec: agentsv1beta1.SandboxSpec{Lifecycle: agentsv1beta1.Lifecycle{ShutdownTime: &shutdown}},
				Status: agentsv1beta1.SandboxStatus{NodeName: "n2", Conditions: []metav1.Condition{
					{Type: "Ready", Status: metav1.ConditionFalse, Reason: "SandboxSuspended"},
					{Type: "Suspended", Status: metav1.ConditionTrue, Reason: "Hibernated"},
				}},
			},
			want: []interface{}{"b", "n2", "Hibernated", "from-label", "3h", "2030-01-01T12:00:00Z"},
		},
		{
			name: "ready condition",
			sb: agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "c"},
				Status: agentsv1beta1.SandboxStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}}},
			want: []interface{}{"c", "<none>", "Running", "<none>", "<unknown>", "<none>"},
		},
		{
			name: "unknown phase shows the reason",
			sb: agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "d"},
				Status: agentsv1beta1.SandboxStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "UnknownPhase"}}}},
			want: []interface{}{"d", "<none>", "UnknownPhase", "<none>", "<unknown>", "<none>"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := row(&tc.sb, now).Cells
			if len(got) != len(tc.want) || len(got) != len(tableColumns) {
				t.Fatalf("cells = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("%s = %v, want %v", tableColumns[i].Name, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestTableOfList(t *testing.T) {
	list := &agentsv1beta1.SandboxList{Items: []agentsv1beta1.Sandbox{{}, {}}}
	list.ResourceVersion = "42"
	table, err := tableConvertor{}.ConvertToTable(context.Background(), list, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 2 || table.ResourceVersion != "42" {
		t.Errorf("table rows %d rv %q", len(table.Rows), table.ResourceVersion)
	}
	if _, err := (tableConvertor{}).ConvertToTable(context.Background(), &metav1.Status{}, nil); err == nil {
		t.Error("a non-sandbox object rendered without error")
	}
}

func TestMetaValuePrefersAnnotationsAndIsStable(t *testing.T) {
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{
		Annotations: map[string]string{"z.example/node": "late", "a.example/node": "early", "x.example/other": "o"},
		Labels:      map[string]string{"node": "label"},
	}}
	for i := 0; i < 20; i++ { // map order varies between iterations
		if got := metaValue(sb, "node"); got != "early" {
			t.Fatalf("metaValue = %q, want early", got)
		}
	}
	sb.Annotations = nil
	if got := metaValue(sb, "node"); got != "label" {
		t.Errorf("metaValue from labels = %q", got)
	}
}
