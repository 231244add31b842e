package envdproxy

// UploadsInFlight is how many of the sandbox's uploads hold a slot, for
// tests that must not race the proxy's reading of a request.
func UploadsInFlight(p *Proxy, id string) int {
	p.uploads.mu.Lock()
	defer p.uploads.mu.Unlock()
	return p.uploads.inFlight[id]
}
