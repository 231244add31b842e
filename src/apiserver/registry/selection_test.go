package registry

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
)

func TestMatcher(t *testing.T) {
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Labels: map[string]string{"app": "x"}}}
	cases := []struct {
		field, label string
		want         bool
	}{
		{"", "", true},
		{"metadata.name=web", "", true},
		{"metadata.name=api", "", false},
		{"metadata.namespace=ns,metadata.name=web", "app=x", true},
		{"metadata.namespace!=ns", "", false},
		{"", "app=y", false},
		{"", "!app", false},
	}
	for _, tc := range cases {
		opts := &metainternalversion.ListOptions{}
		if tc.field != "" {
			opts.FieldSelector = fields.ParseSelectorOrDie(tc.field)
		}
		if tc.label != "" {
			sel, err := labels.Parse(tc.label)
			if err != nil {
				t.Fatal(err)
			}
			opts.LabelSelector = sel
		}
		m, err := newMatcher(opts)
		if err != nil {
			t.Fatalf("%q %q: %v", tc.field, tc.label, err)
		}
		if got := m(sb); got != tc.want {
			t.Errorf("field %q label %q = %v, want %v", tc.field, tc.label, got, tc.want)
		}
	}

	_, err := newMatcher(&metainternalversion.ListOptions{FieldSelector: fields.ParseSelectorOrDie("status.nodeName=n1")})
	if !apierrors.IsBadRequest(err) {
		t.Errorf("unsupported field: %v, want BadRequest", err)
	}
}

func TestParseResourceVersion(t *testing.T) {
	for in, want := range map[string]Revision{"": 0, "0": 0, "17": 17, "18446744073709551615": 1<<64 - 1} {
		got, err := parseResourceVersion(in)
		if err != nil || got != want {
			t.Errorf("parseResourceVersion(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"abc", "-1", "1.5", "18446744073709551616"} {
		if _, err := parseResourceVersion(in); !apierrors.IsBadRequest(err) {
			t.Errorf("parseResourceVersion(%q) = %v, want BadRequest", in, err)
		}
	}
}
