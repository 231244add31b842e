package monitoring_test

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cocoonstack/sandbox-operator/tests/chartrender"
)

// defaultRunbookBase is monitoring.prometheusRule.runbookBaseURL's default.
const defaultRunbookBase = "https://github.com/cocoonstack/sandbox-operator/blob/main/docs/operations.md"

// operationsDoc reads docs/operations.md: a runfile under Bazel
// (//:docs/operations.md in data), three levels up under go test.
func operationsDoc(t *testing.T) string {
	t.Helper()
	var errs []error
	for _, p := range []string{"docs/operations.md", "../../../docs/operations.md"} {
		data, err := os.ReadFile(p)
		if err == nil {
			return string(data)
		}
		errs = append(errs, err)
	}
	t.Fatalf("docs/operations.md is neither a runfile nor in the source tree: %v", errors.Join(errs...))
	return ""
}

// TestRunbooksExist: every alert's runbook_url is the base URL followed by
// the anchor of a section under "## Alerts" in docs/operations.md, whose
// heading is the alert's name (GitHub's anchor for it is the name in lower
// case).
func TestRunbooksExist(t *testing.T) {
	spec := prometheusRuleSpec(t, chartrender.RenderSets(t, releaseNamespace, "monitoring.prometheusRule.enabled=true"))
	groups, _, _ := unstructured.NestedSlice(spec, "groups")
	doc := operationsDoc(t)
	_, alertsSection, found := strings.Cut(doc, "\n## Alerts\n")
	if !found {
		t.Fatal(`docs/operations.md has no "## Alerts" section`)
	}
	if next := regexp.MustCompile(`\n## `).FindStringIndex(alertsSection); next != nil {
		alertsSection = alertsSection[:next[0]]
	}
	checked := 0
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			rule := r.(map[string]any)
			alert, _ := rule["alert"].(string)
			url, _, _ := unstructured.NestedString(rule, "annotations", "runbook_url")
			if want := defaultRunbookBase + "#" + strings.ToLower(alert); url != want {
				t.Errorf("%s runbook_url = %q, want %q", alert, url, want)
			}
			if !regexp.MustCompile(`(?m)^### ` + regexp.QuoteMeta(alert) + `$`).MatchString(alertsSection) {
				t.Errorf(`docs/operations.md's "## Alerts" has no "### %s" section, which %s's runbook_url points at`, alert, alert)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("the rendered group has no alert")
	}
}
