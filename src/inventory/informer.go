package inventory

import (
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
)

// Informer watches every NodeInventory and decodes each object straight
// into the typed v1beta1.NodeInventory.
//
// A dynamic informer decodes into nested maps first and Compact then
// converts them by reflection. Every node republishes its whole object
// each period, so that decode is most of what a server spends while
// sandboxes live: profiled during a 300-claim burst it was about half of
// the sandbox-apiserver's CPU, and most of it went on managedFields, where
// server-side apply keeps one nested field set per entry. Decoded typed,
// a field set is a byte slice the transform drops.
//
// Informer satisfies serve.InformerFactory: Start runs the informer until
// its stop channel closes, Shutdown waits for it.
type Informer struct {
	informer cache.SharedIndexInformer
	wg       sync.WaitGroup
}

// NewInformer builds the informer over config's cluster. It caches objects
// through Compact and never resyncs: the Store re-evaluates freshness on
// its own clock.
func NewInformer(config *rest.Config) (*Informer, error) {
	client, err := restClient(config)
	if err != nil {
		return nil, err
	}
	lw := cache.NewListWatchFromClient(client, v1beta1.NodeInventoryResource, metav1.NamespaceAll, fields.Everything())
	informer := cache.NewSharedIndexInformer(lw, &v1beta1.NodeInventory{}, 0, cache.Indexers{})
	if err := informer.SetTransform(Compact); err != nil {
		return nil, fmt.Errorf("inventory: compacting cached NodeInventory objects: %w", err)
	}
	return &Informer{informer: informer}, nil
}

// restClient is a client of the NodeInventory group that decodes into
// this package's types.
func restClient(config *rest.Config) (*rest.RESTClient, error) {
	scheme := runtime.NewScheme()
	if err := v1beta1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("inventory: registering NodeInventory: %w", err)
	}
	c := rest.CopyConfig(config)
	c.GroupVersion = &v1beta1.SchemeGroupVersion
	c.APIPath = "/apis"
	// Custom resources are served as JSON only.
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	client, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("inventory: NodeInventory client: %w", err)
	}
	return client, nil
}

// SharedIndexInformer is the informer, for a Store's Source and for
// HasSynced.
func (i *Informer) SharedIndexInformer() cache.SharedIndexInformer { return i.informer }

// Start runs the informer until stop closes.
func (i *Informer) Start(stop <-chan struct{}) {
	i.wg.Go(func() { i.informer.Run(stop) })
}

// Shutdown waits for the informer started by Start to end; close its stop
// channel first.
func (i *Informer) Shutdown() { i.wg.Wait() }
