package v1beta1_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
)

func TestAddToSchemeRegistersKinds(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for obj, kind := range map[runtime.Object]string{
		&v1beta1.NodeInventory{}:     "NodeInventory",
		&v1beta1.NodeInventoryList{}: "NodeInventoryList",
	} {
		gvks, _, err := scheme.ObjectKinds(obj)
		if err != nil {
			t.Fatalf("%T not registered: %v", obj, err)
		}
		want := schema.GroupVersionKind{Group: "sandbox.cocoonstack.io", Version: "v1beta1", Kind: kind}
		if len(gvks) != 1 || gvks[0] != want {
			t.Errorf("%T kinds = %v, want [%v]", obj, gvks, want)
		}
	}
	wantGVR := schema.GroupVersionResource{Group: "sandbox.cocoonstack.io", Version: "v1beta1", Resource: "nodeinventories"}
	if v1beta1.NodeInventoryGVR != wantGVR {
		t.Errorf("NodeInventoryGVR = %v, want %v", v1beta1.NodeInventoryGVR, wantGVR)
	}
	if got := v1beta1.Resource("nodeinventories").String(); got != "nodeinventories.sandbox.cocoonstack.io" {
		t.Errorf("Resource() = %q", got)
	}
}
