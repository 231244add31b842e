package sandbox

import (
	"strings"
	"testing"
)

func TestClaimRefRoundTrip(t *testing.T) {
	ref, err := NewClaimRef("team", "web")
	if err != nil {
		t.Fatal(err)
	}
	if ref.String() != "team/web" {
		t.Fatalf("String() = %q", ref.String())
	}
	back, ok := ParseClaimRef(ref.String())
	if !ok || back != ref {
		t.Fatalf("ParseClaimRef(%q) = %v, %v", ref, back, ok)
	}
}

func TestNewClaimRefRefusesBadNames(t *testing.T) {
	for _, tc := range []struct{ ns, name string }{
		{"", "web"}, {"team", ""}, {"Team", "web"}, {"team/x", "web"}, {"team", "web_1"}, {"team", "Web"},
		{strings.Repeat("a", 64), "web"}, {"team", strings.Repeat("a", 254)},
	} {
		if _, err := NewClaimRef(tc.ns, tc.name); err == nil {
			t.Errorf("NewClaimRef(%q, %q) accepted", tc.ns, tc.name)
		}
	}
}

func TestParseClaimRefNamesForkChildren(t *testing.T) {
	parent := ClaimRef{Namespace: "team", Name: "web"}
	ref, ok := ParseClaimRef(ForkPrefix(parent) + "sb_0a1b")
	if !ok || ref != (ClaimRef{Namespace: "team", Name: "web-fork-sb-0a1b"}) {
		t.Fatalf("fork child = %v, %v", ref, ok)
	}
	if ref, ok := ParseClaimRef("team-a/a.b"); !ok || ref.Name != "a.b" {
		t.Errorf("a dotted name: %v, %v", ref, ok)
	}
	for _, s := range []string{"", "web", "sb_0a1b", "/web", "team/", "Team/web", "team/Web", "team/a/b", "team/-x", "a.b/web"} {
		if ref, ok := ParseClaimRef(s); ok {
			t.Errorf("ParseClaimRef(%q) = %v, want no namespace", s, ref)
		}
	}
}

func TestCheckFork(t *testing.T) {
	parent := ClaimRef{Namespace: "team", Name: "web"}
	for _, n := range []int{1, MaxForkCount} {
		if err := CheckFork(parent, "sb_0123", n); err != nil {
			t.Errorf("count %d refused: %v", n, err)
		}
	}
	for _, n := range []int{0, -1, MaxForkCount + 1} {
		if err := CheckFork(parent, "sb_0123", n); err == nil {
			t.Errorf("count %d accepted", n)
		}
	}
	long := ClaimRef{Namespace: "team", Name: strings.Repeat("a", 240)}
	if err := CheckFork(long, "sb_0123456789", 1); err == nil {
		t.Error("a parent name no child could carry was accepted")
	}
}

func TestPoolKeyOf(t *testing.T) {
	key, ok := PoolKeyOf(nil, " img:1 ")
	if !ok || key != (PoolKey{Template: "img:1", Net: DefaultNet, Size: DefaultSize}) {
		t.Fatalf("image only: %v, %v", key, ok)
	}
	key, ok = PoolKeyOf(map[string]string{AnnotationTemplate: "tpl", AnnotationNet: "egress", AnnotationSize: "large"}, "img:1")
	if !ok || key != (PoolKey{Template: "tpl", Net: "egress", Size: "large"}) {
		t.Fatalf("annotations: %v, %v", key, ok)
	}
	if _, ok := PoolKeyOf(map[string]string{AnnotationNet: "egress"}, " "); ok {
		t.Fatal("no template accepted")
	}
}

func TestSizeTiers(t *testing.T) {
	small, ok := SizeOf("")
	if !ok || small.CPUCount != 1 || small.MemoryBytes() != 1<<30 {
		t.Fatalf("default size = %+v, %v", small, ok)
	}
	if _, ok := SizeOf("huge"); ok {
		t.Fatal("unknown size accepted")
	}
	tiers := SizeTiers()
	tiers["small"] = SizeTier{}
	if s, _ := SizeOf("small"); s.CPUCount != 1 {
		t.Fatal("SizeTiers shares its map with the package")
	}
}
