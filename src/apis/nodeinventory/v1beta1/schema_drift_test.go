package v1beta1_test

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/cocoonstack/sandbox-operator/charts/sandbox-operator/crds"
	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
)

// regenerateHint ends every drift failure: the fix is always to regenerate.
const regenerateHint = "the checked-in CRD no longer matches the Go types: run tools/codegen.sh and commit the result"

// schemaNode is the part of an OpenAPI schema the Go types determine: field
// names, types, formats, required-ness and item shapes. Descriptions and
// validation markers are left out because reflection cannot see comments.
type schemaNode struct {
	Type       string
	Format     string
	Properties map[string]*schemaNode
	Required   []string
	Items      *schemaNode
}

var (
	metaTimeType   = reflect.TypeFor[metav1.Time]()
	objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()
	listMetaType   = reflect.TypeFor[metav1.ListMeta]()
)

// schemaFromType derives the schema controller-gen emits for t, following
// its rules: a field is required unless its json tag says omitempty or
// omitzero (the types keep "+optional" and omitempty in step), inline
// embedded structs contribute their fields, and object metadata is an opaque
// object because the apiserver owns its schema.
func schemaFromType(t reflect.Type) (*schemaNode, error) {
	switch t {
	case metaTimeType:
		return &schemaNode{Type: "string", Format: "date-time"}, nil
	case objectMetaType, listMetaType:
		return &schemaNode{Type: "object"}, nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return schemaFromType(t.Elem())
	case reflect.String:
		return &schemaNode{Type: "string"}, nil
	case reflect.Bool:
		return &schemaNode{Type: "boolean"}, nil
	case reflect.Int32:
		return &schemaNode{Type: "integer", Format: "int32"}, nil
	case reflect.Int64:
		return &schemaNode{Type: "integer", Format: "int64"}, nil
	case reflect.Int:
		return &schemaNode{Type: "integer"}, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return &schemaNode{Type: "string", Format: "byte"}, nil
		}
		items, err := schemaFromType(t.Elem())
		if err != nil {
			return nil, err
		}
		return &schemaNode{Type: "array", Items: items}, nil
	case reflect.Struct:
		node := &schemaNode{Type: "object", Properties: map[string]*schemaNode{}}
		if err := addStructFields(node, t); err != nil {
			return nil, err
		}
		sort.Strings(node.Required)
		return node, nil
	default:
		return nil, fmt.Errorf("type %s (kind %s) has no schema mapping in this test; extend schemaFromType", t, t.Kind())
	}
}

func addStructFields(node *schemaNode, t reflect.Type) error {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			if err := addStructFields(node, f.Type); err != nil {
				return err
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		prop, err := schemaFromType(f.Type)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
		}
		node.Properties[name] = prop
		optional := slices.ContainsFunc(strings.Split(opts, ","), func(o string) bool {
			return o == "omitempty" || o == "omitzero"
		})
		if !optional {
			node.Required = append(node.Required, name)
		}
	}
	return nil
}

func schemaFromCRD(p *apiextensionsv1.JSONSchemaProps) *schemaNode {
	node := &schemaNode{Type: p.Type, Format: p.Format}
	if len(p.Required) > 0 {
		node.Required = slices.Sorted(slices.Values(p.Required))
	}
	if len(p.Properties) > 0 {
		node.Properties = map[string]*schemaNode{}
		for name, prop := range p.Properties {
			node.Properties[name] = schemaFromCRD(&prop)
		}
	}
	if p.Items != nil && p.Items.Schema != nil {
		node.Items = schemaFromCRD(p.Items.Schema)
	}
	return node
}

// diffSchemas lists every difference between the schema the types imply
// (want) and the one the CRD carries (got), each prefixed by its field path.
func diffSchemas(path string, want, got *schemaNode) []string {
	var diffs []string
	if want.Type != got.Type {
		diffs = append(diffs, fmt.Sprintf("%s: type is %q in the Go types but %q in the CRD", path, want.Type, got.Type))
	}
	if want.Format != got.Format {
		diffs = append(diffs, fmt.Sprintf("%s: format is %q in the Go types but %q in the CRD", path, want.Format, got.Format))
	}
	if !slices.Equal(want.Required, got.Required) {
		diffs = append(diffs, fmt.Sprintf("%s: required fields are %v in the Go types but %v in the CRD", path, want.Required, got.Required))
	}
	for _, name := range slices.Sorted(mapKeys(want.Properties, got.Properties)) {
		w, inTypes := want.Properties[name]
		g, inCRD := got.Properties[name]
		switch {
		case !inCRD:
			diffs = append(diffs, fmt.Sprintf("%s.%s: field is in the Go types but missing from the CRD", path, name))
		case !inTypes:
			diffs = append(diffs, fmt.Sprintf("%s.%s: field is in the CRD but not in the Go types", path, name))
		default:
			diffs = append(diffs, diffSchemas(path+"."+name, w, g)...)
		}
	}
	switch {
	case want.Items != nil && got.Items != nil:
		diffs = append(diffs, diffSchemas(path+"[]", want.Items, got.Items)...)
	case want.Items != nil:
		diffs = append(diffs, fmt.Sprintf("%s: the Go types have list items the CRD lacks", path))
	case got.Items != nil:
		diffs = append(diffs, fmt.Sprintf("%s: the CRD has list items the Go types lack", path))
	}
	return diffs
}

func mapKeys(maps ...map[string]*schemaNode) func(func(string) bool) {
	return func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, m := range maps {
			for k := range m {
				if seen[k] {
					continue
				}
				seen[k] = true
				if !yield(k) {
					return
				}
			}
		}
	}
}

func loadCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(crds.NodeInventoryYAML, &crd); err != nil {
		t.Fatalf("parse checked-in CRD: %v (%s)", err, regenerateHint)
	}
	return &crd
}

func crdVersion(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinitionVersion {
	t.Helper()
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == v1beta1.Version {
			return &crd.Spec.Versions[i]
		}
	}
	t.Fatalf("CRD has no version %q; %s", v1beta1.Version, regenerateHint)
	return nil
}

func TestCRDIdentity(t *testing.T) {
	crd := loadCRD(t)
	checks := []struct{ what, got, want string }{
		{"kind", crd.Kind, "CustomResourceDefinition"},
		{"apiVersion", crd.APIVersion, "apiextensions.k8s.io/v1"},
		{"metadata.name", crd.Name, v1beta1.NodeInventoryResource + "." + v1beta1.GroupName},
		{"spec.group", crd.Spec.Group, v1beta1.GroupName},
		{"spec.names.kind", crd.Spec.Names.Kind, v1beta1.NodeInventoryKind},
		{"spec.names.listKind", crd.Spec.Names.ListKind, v1beta1.NodeInventoryListKind},
		{"spec.names.plural", crd.Spec.Names.Plural, v1beta1.NodeInventoryResource},
		{"spec.names.singular", crd.Spec.Names.Singular, "nodeinventory"},
		{"spec.scope", string(crd.Spec.Scope), string(apiextensionsv1.ClusterScoped)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q; %s", c.what, c.got, c.want, regenerateHint)
		}
	}
	if n := len(crd.Spec.Versions); n != 1 {
		t.Errorf("CRD has %d versions, want exactly %s; %s", n, v1beta1.Version, regenerateHint)
	}
	v := crdVersion(t, crd)
	if !v.Served || !v.Storage {
		t.Errorf("version %s served=%v storage=%v, want both true; %s", v.Name, v.Served, v.Storage, regenerateHint)
	}
	if v.Subresources != nil && (v.Subresources.Status != nil || v.Subresources.Scale != nil) {
		t.Errorf("version %s declares subresources %+v; NodeInventory has no status or scale; %s", v.Name, v.Subresources, regenerateHint)
	}
}

func TestCRDSchemaMatchesTypes(t *testing.T) {
	v := crdVersion(t, loadCRD(t))
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		t.Fatalf("version %s has no openAPIV3Schema; %s", v.Name, regenerateHint)
	}
	want, err := schemaFromType(reflect.TypeFor[v1beta1.NodeInventory]())
	if err != nil {
		t.Fatal(err)
	}
	got := schemaFromCRD(v.Schema.OpenAPIV3Schema)
	if diffs := diffSchemas("NodeInventory", want, got); len(diffs) > 0 {
		t.Fatalf("%s:\n  %s", regenerateHint, strings.Join(diffs, "\n  "))
	}
}

// TestCRDListsAreAtomic pins a design decision the types only express as
// markers: the publisher applies the whole inventory at once, so no list may
// be merged item by item with another manager's.
func TestCRDListsAreAtomic(t *testing.T) {
	v := crdVersion(t, loadCRD(t))
	var walk func(path string, p *apiextensionsv1.JSONSchemaProps)
	walk = func(path string, p *apiextensionsv1.JSONSchemaProps) {
		if p.Type == "array" {
			if p.XListType == nil || *p.XListType != "atomic" {
				t.Errorf("%s: x-kubernetes-list-type is %v, want atomic; %s", path, p.XListType, regenerateHint)
			}
		}
		for name, prop := range p.Properties {
			walk(path+"."+name, &prop)
		}
		if p.Items != nil && p.Items.Schema != nil {
			walk(path+"[]", p.Items.Schema)
		}
	}
	walk("NodeInventory", v.Schema.OpenAPIV3Schema)
}

// TestSchemaDiffDetectsDrift proves the comparison above can fail: each kind
// of drift it claims to catch, applied to an otherwise matching schema, must
// be reported.
func TestSchemaDiffDetectsDrift(t *testing.T) {
	derive := func() *schemaNode {
		s, err := schemaFromType(reflect.TypeFor[v1beta1.NodeInventory]())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if diffs := diffSchemas("x", derive(), derive()); len(diffs) != 0 {
		t.Fatalf("identical schemas reported as different: %v", diffs)
	}
	drifts := map[string]func(s *schemaNode){
		"field added": func(s *schemaNode) { s.Properties["extra"] = &schemaNode{Type: "string"} },
		"field removed": func(s *schemaNode) {
			delete(s.Properties, "address")
		},
		"field renamed": func(s *schemaNode) {
			s.Properties["addr"] = s.Properties["address"]
			delete(s.Properties, "address")
		},
		"field retyped":        func(s *schemaNode) { s.Properties["pools"].Items.Properties["warm"].Format = "int64" },
		"required dropped":     func(s *schemaNode) { s.Properties["entries"].Items.Required = []string{"name"} },
		"required added":       func(s *schemaNode) { s.Required = append(s.Required, "address") },
		"nested field removed": func(s *schemaNode) { delete(s.Properties["entries"].Items.Properties, "claimedAt") },
		"items lost":           func(s *schemaNode) { s.Properties["pools"].Items = nil },
	}
	for name, drift := range drifts {
		t.Run(name, func(t *testing.T) {
			mutated := derive()
			drift(mutated)
			if diffs := diffSchemas("x", derive(), mutated); len(diffs) == 0 {
				t.Errorf("drift %q went unreported", name)
			}
		})
	}
}
