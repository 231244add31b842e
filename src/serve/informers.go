package serve

import "k8s.io/client-go/tools/cache"

// InformerFactory is what Informers drives; client-go's shared informer
// factories (dynamicinformer's included) satisfy it.
type InformerFactory interface {
	Start(stopCh <-chan struct{})
	Shutdown()
}

// Informers starts factory's informers, logs once every synced reports
// true, and shuts the factory down (waiting for its goroutines) when the
// group's context ends. Readiness should still check synced: Informers
// does not hold startup back.
func (g *Group) Informers(name string, factory InformerFactory, synced ...cache.InformerSynced) {
	factory.Start(g.ctx.Done())
	g.wg.Go(func() {
		defer factory.Shutdown()
		if cache.WaitForCacheSync(g.ctx.Done(), synced...) {
			g.log.Info("informers synced", "informers", name)
		}
		<-g.ctx.Done()
	})
}
