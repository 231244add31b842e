package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// InstallCRDs creates (or updates) the CustomResourceDefinitions in yamls,
// each a YAML stream of one or more CRD documents, and waits until every
// one is Established and its names accepted, so that the caller can use
// the new resources at once. Waits end with ctx.
func (c *Cluster) InstallCRDs(ctx context.Context, yamls ...[]byte) error {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for i, y := range yamls {
		decoded, err := decodeCRDs(y)
		if err != nil {
			return fmt.Errorf("CRD manifest %d: %w", i, err)
		}
		crds = append(crds, decoded...)
	}
	if len(crds) == 0 {
		return errors.New("install CRDs: no CustomResourceDefinition in the manifests")
	}

	client, err := apiextensionsclient.NewForConfig(c.AdminConfig())
	if err != nil {
		return fmt.Errorf("apiextensions client: %w", err)
	}
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range crds {
		if err := createOrUpdateCRD(ctx, api, crd); err != nil {
			return err
		}
	}
	for _, crd := range crds {
		if err := waitEstablished(ctx, api, crd.Name); err != nil {
			return err
		}
	}
	// Discovery lags behind Established: a client that maps kinds through
	// it (controller-runtime's, kubectl) would find no match for a moment.
	for _, crd := range crds {
		if err := c.waitDiscovered(ctx, crd); err != nil {
			return err
		}
	}
	return nil
}

// waitDiscovered polls until discovery lists the CRD's resource in every
// version it serves.
func (c *Cluster) waitDiscovered(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		gv := crd.Spec.Group + "/" + v.Name
		var last error
		err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(context.Context) (bool, error) {
			list, err := c.clientset.Discovery().ServerResourcesForGroupVersion(gv)
			if err != nil {
				last = err
				return false, nil
			}
			for _, r := range list.APIResources {
				if r.Name == crd.Spec.Names.Plural {
					return true, nil
				}
			}
			last = fmt.Errorf("%s lists no %s", gv, crd.Spec.Names.Plural)
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("wait for discovery to serve CRD %s: %w", crd.Name, errors.Join(err, last))
		}
	}
	return nil
}

// decodeCRDs reads every non-empty document of a YAML stream as a CRD.
func decodeCRDs(manifest []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	var out []*apiextensionsv1.CustomResourceDefinition
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := dec.Decode(crd); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decode: %w", err)
		}
		if crd.Kind == "" && crd.Name == "" {
			continue // an empty document between separators
		}
		if crd.Kind != "CustomResourceDefinition" || crd.Name == "" {
			return nil, fmt.Errorf("document %q of kind %q is not a named CustomResourceDefinition", crd.Name, crd.Kind)
		}
		out = append(out, crd)
	}
}

type crdAPI interface {
	Create(context.Context, *apiextensionsv1.CustomResourceDefinition, metav1.CreateOptions) (*apiextensionsv1.CustomResourceDefinition, error)
	Get(context.Context, string, metav1.GetOptions) (*apiextensionsv1.CustomResourceDefinition, error)
	Update(context.Context, *apiextensionsv1.CustomResourceDefinition, metav1.UpdateOptions) (*apiextensionsv1.CustomResourceDefinition, error)
}

func createOrUpdateCRD(ctx context.Context, api crdAPI, crd *apiextensionsv1.CustomResourceDefinition) error {
	_, err := api.Create(ctx, crd, metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD %s: %w", crd.Name, err)
	}
	existing, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get CRD %s: %w", crd.Name, err)
	}
	crd.ResourceVersion = existing.ResourceVersion
	if _, err := api.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update CRD %s: %w", crd.Name, err)
	}
	return nil
}

// waitEstablished polls until the CRD's Established and NamesAccepted
// conditions are True. A NamesAccepted=False (a name clash) ends the wait
// at once with the server's reason.
func waitEstablished(ctx context.Context, api crdAPI, name string) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		crd, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		established, named := false, false
		for _, cond := range crd.Status.Conditions {
			switch cond.Type {
			case apiextensionsv1.Established:
				established = cond.Status == apiextensionsv1.ConditionTrue
			case apiextensionsv1.NamesAccepted:
				if cond.Status == apiextensionsv1.ConditionFalse {
					return false, fmt.Errorf("names not accepted: %s: %s", cond.Reason, cond.Message)
				}
				named = cond.Status == apiextensionsv1.ConditionTrue
			}
		}
		last = fmt.Sprintf("established=%t namesAccepted=%t", established, named)
		return established && named, nil
	})
	if err != nil {
		return fmt.Errorf("wait for CRD %s (%s): %w", name, last, err)
	}
	return nil
}
