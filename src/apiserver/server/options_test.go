package server

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestRecommendedOptionsWithoutEtcd(t *testing.T) {
	o := NewRecommendedOptions()
	if o.Etcd != nil || o.Admission != nil {
		t.Fatalf("etcd %v admission %v, want both nil", o.Etcd, o.Admission)
	}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		if strings.HasPrefix(f.Name, "etcd") || strings.HasPrefix(f.Name, "storage") {
			t.Errorf("storage flag --%s is exposed", f.Name)
		}
	})
	if err := fs.Parse([]string{"--secure-port=7443", "--cert-dir=" + t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if errs := o.Validate(); len(errs) > 0 {
		t.Errorf("Validate: %v", errs)
	}
	if o.SecureServing.BindPort != 7443 {
		t.Errorf("BindPort = %d", o.SecureServing.BindPort)
	}
	if NewRecommendedOptions().SecureServing.BindPort != DefaultSecurePort {
		t.Errorf("default port is not %d", DefaultSecurePort)
	}
}

func TestNewConfigRejectsNilBackend(t *testing.T) {
	if _, err := NewConfig(NewRecommendedOptions(), nil); err == nil {
		t.Error("NewConfig accepted a nil backend")
	}
}

func TestRESTFriendlyName(t *testing.T) {
	for in, want := range map[string]string{
		"sigs.k8s.io/agent-sandbox/api/v1beta1.Sandbox": "io.k8s.sigs.agent-sandbox.api.v1beta1.Sandbox",
		"io.k8s.api.core.v1.PodSpec":                    "io.k8s.api.core.v1.PodSpec",
		"example/pkg.Kind":                              "example.pkg.Kind",
	} {
		if got := restFriendlyName(in); got != want {
			t.Errorf("restFriendlyName(%q) = %q, want %q", in, got, want)
		}
	}
}
